// The load generator's gRPC client (serve/loadgen_grpc.h).
#include "serve/loadgen_grpc.h"

#include <grpcpp/grpcpp.h>

#include <chrono>
#include <memory>
#include <mutex>

#include <fmt/format.h>

#include "serve/proto/inference.grpc.pb.h"

namespace ferry::serve {
namespace {

namespace pb = ::inference;

std::shared_ptr<grpc::Channel> MakeChannel(const HostPort& target, bool own_pool) {
  grpc::ChannelArguments args;
  args.SetMaxReceiveMessageSize(-1);
  args.SetMaxSendMessageSize(-1);
  // gRPC shares subchannels (connections) between channels to one address by default; a local
  // pool gives this channel its own connection.
  if (own_pool) args.SetInt(GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, 1);
  return grpc::CreateCustomChannel(target.ToString(), grpc::InsecureChannelCredentials(), args);
}

std::string Describe(const grpc::Status& s) {
  std::string m = s.error_message();
  for (char& c : m) {
    if (c == '\n' || c == '\r') c = ' ';
  }
  if (m.size() > 300) m = m.substr(0, 300) + "...";
  return fmt::format("gRPC status {}: {}", static_cast<int>(s.error_code()), m);
}

class GrpcLoadClient : public LoadClient {
 public:
  GrpcLoadClient(const HostPort& target, const LoadTimeouts& t,
                 std::shared_ptr<grpc::Channel> channel)
      : target_(target),
        timeouts_(t),
        channel_(std::move(channel)),
        stub_(pb::GRPCInferenceService::NewStub(channel_)) {}

  Status Metadata(const std::string& model, const std::string& version,
                  ModelMetadata* out) override {
    pb::ModelMetadataRequest req;
    req.set_name(model);
    req.set_version(version);
    pb::ModelMetadataResponse res;
    grpc::ClientContext ctx;
    ctx.set_deadline(Deadline());
    grpc::Status s = stub_->ModelMetadata(&ctx, req, &res);
    if (!s.ok()) {
      return InvalidError("{} (gRPC): ModelMetadata '{}': {}", target_.ToString(), model,
                          Describe(s));
    }
    out->name = res.name();
    out->platform = res.platform();
    out->versions.assign(res.versions().begin(), res.versions().end());
    for (const auto& t : res.inputs()) {
      out->inputs.push_back({t.name(), t.datatype(), {t.shape().begin(), t.shape().end()}});
    }
    for (const auto& t : res.outputs()) {
      out->outputs.push_back({t.name(), t.datatype(), {t.shape().begin(), t.shape().end()}});
    }
    return Status::Ok();
  }

  void SetRequest(const LoadRequest& request) override {
    req_.Clear();
    req_.set_model_name(request.model);
    req_.set_model_version(request.version);
    for (const auto& in : request.inputs) {
      auto* t = req_.add_inputs();
      t->set_name(in.name);
      t->set_datatype(in.datatype);
      for (int64_t d : in.shape) t->add_shape(d);
      req_.add_raw_input_contents(in.raw);
    }
    outputs_ = request.outputs;
    checked_.clear();
  }

  bool Infer(std::string* error) override {
    grpc::ClientContext ctx;
    ctx.set_deadline(Deadline());
    res_.Clear();
    grpc::Status s = stub_->ModelInfer(&ctx, req_, &res_);
    if (!s.ok()) {
      *error = Describe(s);
      return false;
    }
    bool same = !checked_.empty() &&
                static_cast<size_t>(res_.raw_output_contents_size()) == checked_.size();
    for (size_t i = 0; same && i < checked_.size(); ++i) {
      same = res_.raw_output_contents(static_cast<int>(i)).size() == checked_[i];
    }
    if (same) return true;
    std::vector<SeenOutput> seen;
    bool raw = res_.raw_output_contents_size() > 0;
    if (raw && res_.raw_output_contents_size() != res_.outputs_size()) {
      *error = fmt::format("{} raw_output_contents for {} outputs", res_.raw_output_contents_size(),
                           res_.outputs_size());
      return false;
    }
    for (int i = 0; i < res_.outputs_size(); ++i) {
      const auto& o = res_.outputs(i);
      SeenOutput so{o.name(), o.datatype(), {o.shape().begin(), o.shape().end()}, 0};
      if (raw) {
        so.raw_bytes = res_.raw_output_contents(i).size();
      } else {  // typed contents: counted as if raw
        const auto& c = o.contents();
        uint64_t n = static_cast<uint64_t>(c.bool_contents_size() + c.int_contents_size() +
                                           c.int64_contents_size() + c.uint_contents_size() +
                                           c.uint64_contents_size() + c.fp32_contents_size() +
                                           c.fp64_contents_size() + c.bytes_contents_size());
        auto dt = DTypeFromDatatype(o.datatype());
        so.raw_bytes = n * (dt && *dt != DType::kString ? DTypeSize(*dt) : 4);
      }
      seen.push_back(std::move(so));
    }
    std::string err = CheckOutputs(seen, outputs_);
    if (!err.empty()) {
      *error = err;
      return false;
    }
    checked_.clear();
    for (int i = 0; i < res_.raw_output_contents_size(); ++i) {
      checked_.push_back(res_.raw_output_contents(i).size());
    }
    return true;
  }

 private:
  std::chrono::system_clock::time_point Deadline() const {
    return std::chrono::system_clock::now() + std::chrono::seconds(timeouts_.request_s);
  }

  HostPort target_;
  LoadTimeouts timeouts_;
  std::shared_ptr<grpc::Channel> channel_;
  std::unique_ptr<pb::GRPCInferenceService::Stub> stub_;
  pb::ModelInferRequest req_;
  pb::ModelInferResponse res_;
  std::vector<TensorMetadata> outputs_;
  // Raw output sizes of the last fully checked answer (empty: none yet, or typed contents).
  std::vector<size_t> checked_;
};

Status WaitReady(const HostPort& target, const LoadTimeouts& t, grpc::Channel* channel) {
  auto deadline = std::chrono::system_clock::now() + std::chrono::seconds(t.connect_s);
  if (!channel->WaitForConnected(deadline)) {
    return InvalidError("{} (gRPC): cannot connect within {} s", target.ToString(), t.connect_s);
  }
  return Status::Ok();
}

}  // namespace

LoadClientFactory GrpcLoadClientFactory(const HostPort& target, const LoadTimeouts& timeouts,
                                        GrpcChannels channels) {
  struct Shared {
    std::mutex mu;
    std::shared_ptr<grpc::Channel> channel;
  };
  auto shared = std::make_shared<Shared>();
  return [target, timeouts, channels, shared]() -> Result<std::unique_ptr<LoadClient>> {
    std::shared_ptr<grpc::Channel> channel;
    if (channels == GrpcChannels::kShared) {
      std::lock_guard<std::mutex> lock(shared->mu);
      if (!shared->channel) shared->channel = MakeChannel(target, false);
      channel = shared->channel;
    } else {
      channel = MakeChannel(target, true);
    }
    FERRY_RETURN_IF_ERROR(WaitReady(target, timeouts, channel.get()));
    return std::unique_ptr<LoadClient>(
        std::make_unique<GrpcLoadClient>(target, timeouts, std::move(channel)));
  };
}

}  // namespace ferry::serve
