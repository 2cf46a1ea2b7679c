// Post-processing (prep/decode.h). Built with -ffp-contract=off like the rest of the library,
// so the float32 steps round as the PyTorch CPU code they reproduce.
#include "prep/decode.h"

#include <algorithm>
#include <cmath>
#include <numeric>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "core/json_text.h"

namespace ferry::prep {

namespace {

// Descending by score, ties by index (std::stable_sort), NaN first (as torch.sort puts it).
std::vector<int64_t> OrderByScore(const float* scores, int64_t n) {
  std::vector<int64_t> order(static_cast<size_t>(n));
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](int64_t a, int64_t b) {
    const float x = scores[a], y = scores[b];
    if (std::isnan(x) || std::isnan(y)) return std::isnan(x) && !std::isnan(y);
    return x > y;
  });
  return order;
}

}  // namespace

std::vector<int64_t> Nms(const float* boxes, const float* scores, int64_t n, double iou_threshold) {
  std::vector<int64_t> keep;
  if (n <= 0) return keep;
  std::vector<float> area(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) {
    const float* b = boxes + 4 * i;
    area[i] = (b[2] - b[0]) * (b[3] - b[1]);
  }
  const std::vector<int64_t> order = OrderByScore(scores, n);
  std::vector<char> suppressed(static_cast<size_t>(n), 0);
  for (int64_t oi = 0; oi < n; ++oi) {
    const int64_t i = order[oi];
    if (suppressed[i]) continue;
    keep.push_back(i);
    const float* bi = boxes + 4 * i;
    for (int64_t oj = oi + 1; oj < n; ++oj) {
      const int64_t j = order[oj];
      if (suppressed[j]) continue;
      const float* bj = boxes + 4 * j;
      const float xx1 = std::max(bi[0], bj[0]), yy1 = std::max(bi[1], bj[1]);
      const float xx2 = std::min(bi[2], bj[2]), yy2 = std::min(bi[3], bj[3]);
      const float w = std::max(0.f, xx2 - xx1), h = std::max(0.f, yy2 - yy1);
      const float inter = w * h;
      const float ovr = inter / (area[i] + area[j] - inter);
      if (static_cast<double>(ovr) > iou_threshold) suppressed[j] = 1;
    }
  }
  return keep;
}

Result<std::vector<Detection>> DecodeYolo(const Tensor& out, const DetectOptions& o) {
  if (out.dtype() != DType::kFloat || out.rank() != 3 || out.dim(0) != 1 || out.dim(1) < 5)
    return InvalidError(
        "a YOLOv8-style detection output is float32 [1, 4 + classes, anchors], got {} {}",
        DTypeName(out.dtype()), ShapeToString(out.shape()));
  const int64_t classes = out.dim(1) - 4, anchors = out.dim(2);
  const float* p = out.data<float>();
  auto at = [&](int64_t row, int64_t a) { return p[row * anchors + a]; };
  // Candidates in anchor order: corners, best score and its class (first maximum).
  struct Cand {
    float box[4];
    float score;
    int64_t cls;
  };
  std::vector<Cand> cand;
  for (int64_t a = 0; a < anchors; ++a) {
    int64_t best = 0;
    float score = at(4, a);
    for (int64_t c = 1; c < classes; ++c)
      if (at(4 + c, a) > score) {
        score = at(4 + c, a);
        best = c;
      }
    if (!(score > o.score_threshold)) continue;
    const float x = at(0, a), y = at(1, a), hw = at(2, a) / 2, hh = at(3, a) / 2;
    cand.push_back({{x - hw, y - hh, x + hw, y + hh}, score, best});
  }
  if (static_cast<int64_t>(cand.size()) > o.max_candidates) {
    std::vector<float> s(cand.size());
    for (size_t i = 0; i < cand.size(); ++i) s[i] = cand[i].score;
    std::vector<int64_t> order = OrderByScore(s.data(), static_cast<int64_t>(s.size()));
    order.resize(static_cast<size_t>(o.max_candidates));
    std::vector<Cand> top;
    for (int64_t i : order) top.push_back(cand[i]);
    cand = std::move(top);
  }
  const int64_t n = static_cast<int64_t>(cand.size());
  // ultralytics offsets each class's boxes by class * max_wh (7680) so NMS runs per class.
  constexpr float kMaxWh = 7680.f;
  std::vector<float> boxes(static_cast<size_t>(4 * n)), scores(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) {
    const float off = o.class_agnostic ? 0.f : static_cast<float>(cand[i].cls) * kMaxWh;
    for (int k = 0; k < 4; ++k) boxes[4 * i + k] = cand[i].box[k] + off;
    scores[i] = cand[i].score;
  }
  std::vector<int64_t> keep = Nms(boxes.data(), scores.data(), n, o.iou_threshold);
  if (static_cast<int64_t>(keep.size()) > o.max_detections)
    keep.resize(static_cast<size_t>(std::max<int64_t>(o.max_detections, 0)));
  std::vector<Detection> dets;
  for (int64_t i : keep) {
    const Cand& c = cand[i];
    dets.push_back({c.box[0], c.box[1], c.box[2], c.box[3], c.score, c.cls});
  }
  return dets;
}

void ScaleBoxes(std::vector<Detection>* boxes, int64_t in_h, int64_t in_w, int64_t orig_h,
                int64_t orig_w) {
  const double gain = std::min(static_cast<double>(in_h) / static_cast<double>(orig_h),
                               static_cast<double>(in_w) / static_cast<double>(orig_w));
  // round(x - 0.1) with Python's round (ties to even), as scale_boxes computes the padding.
  const double pad_x = std::nearbyint((in_w - orig_w * gain) / 2 - 0.1);
  const double pad_y = std::nearbyint((in_h - orig_h * gain) / 2 - 0.1);
  auto map = [&](float v, double pad, int64_t limit) {
    const float f = static_cast<float>((static_cast<float>(v - static_cast<float>(pad))) /
                                       static_cast<float>(gain));
    return std::clamp(f, 0.f, static_cast<float>(limit));
  };
  for (Detection& d : *boxes) {
    d.x1 = map(d.x1, pad_x, orig_w);
    d.x2 = map(d.x2, pad_x, orig_w);
    d.y1 = map(d.y1, pad_y, orig_h);
    d.y2 = map(d.y2, pad_y, orig_h);
  }
}

Result<CtcResult> CtcGreedy(const Tensor& probs, int64_t blank,
                            const std::vector<std::string>& charset) {
  const bool batched = probs.rank() == 3;
  if (probs.dtype() != DType::kFloat || (probs.rank() != 2 && !batched) ||
      (batched && probs.dim(0) != 1))
    return InvalidError("a CTC output is float32 [T, classes] or [1, T, classes], got {} {}",
                        DTypeName(probs.dtype()), ShapeToString(probs.shape()));
  const int64_t steps = probs.dim(batched ? 1 : 0), classes = probs.dim(batched ? 2 : 1);
  const float* p = probs.data<float>();
  CtcResult r;
  int64_t prev = -1;
  for (int64_t t = 0; t < steps; ++t) {
    const float* row = p + t * classes;
    int64_t best = 0;
    for (int64_t c = 1; c < classes; ++c)
      if (row[c] > row[best]) best = c;
    if (best != prev && best != blank) {
      if (best >= static_cast<int64_t>(charset.size()))
        return InvalidError("CTC class {} at step {} has no character (the charset has {})", best,
                            t, charset.size());
      r.ids.push_back(best);
      r.text += charset[static_cast<size_t>(best)];
    }
    prev = best;
  }
  return r;
}

const OutputSpec* FindOutput(const Spec& spec, const std::string& name) {
  for (const auto& o : spec.outputs)
    if (o.name == name) return &o;
  return nullptr;
}

const InputSpec* BoxInput(const Spec& spec, const OutputSpec& o) {
  for (const auto& i : spec.inputs)
    if (o.input.empty() || i.name == o.input) return &i;
  return nullptr;
}

Result<DecodedOutput> DecodeOutput(const Spec& spec, const OutputSpec& o, const Tensor& value,
                                   const ImageInfo* original) {
  DecodedOutput d;
  d.name = o.name;
  d.kind = o.kind;
  if (o.kind == OutputSpec::Kind::kCtc) {
    auto r = CtcGreedy(value, o.blank, o.charset);
    if (!r.ok()) return r.status().With("output '" + o.name + "'");
    d.ctc = std::move(r).value();
    return d;
  }
  DetectOptions opt;
  opt.score_threshold = static_cast<float>(o.score_threshold);
  opt.iou_threshold = o.iou_threshold;
  opt.max_detections = o.max_detections;
  opt.class_agnostic = o.class_agnostic;
  auto r = DecodeYolo(value, opt);
  if (!r.ok()) return r.status().With("output '" + o.name + "'");
  d.detections = std::move(r).value();
  const InputSpec* in = BoxInput(spec, o);
  if (in && original && original->height > 0 && in->image.resize && in->image.resize->letterbox &&
      !in->image.resize->top_left) {
    ScaleBoxes(&d.detections, in->image.resize->height, in->image.resize->width, original->height,
               original->width);
    d.mapped = true;
  }
  for (const auto& det : d.detections)
    d.labels.push_back(det.cls >= 0 && det.cls < static_cast<int64_t>(o.labels.size())
                           ? o.labels[static_cast<size_t>(det.cls)]
                           : "");
  return d;
}

std::string DecodedJson(const DecodedOutput& d) {
  nlohmann::json j;
  if (d.kind == OutputSpec::Kind::kCtc) {
    j["text"] = d.ctc.text;
    j["ids"] = d.ctc.ids;
  } else {
    j["boxes_in"] = d.mapped ? "original image" : "model input";
    j["detections"] = nlohmann::json::array();
    for (size_t i = 0; i < d.detections.size(); ++i) {
      const Detection& b = d.detections[i];
      j["detections"].push_back({{"box", {b.x1, b.y1, b.x2, b.y2}},
                                 {"score", b.score},
                                 {"class", b.cls},
                                 {"label", d.labels[i]}});
    }
  }
  return JsonText(j);
}

std::string FormatDecoded(const DecodedOutput& d) {
  if (d.kind == OutputSpec::Kind::kCtc) {
    std::string ids;
    for (int64_t i : d.ctc.ids) ids += (ids.empty() ? "" : " ") + std::to_string(i);
    return fmt::format("{}: '{}' (ids {})\n", d.name, d.ctc.text, ids.empty() ? "none" : ids);
  }
  std::string s = fmt::format("{}: {} detection(s) (boxes in the {})\n", d.name,
                              d.detections.size(), d.mapped ? "original image" : "model input");
  for (size_t i = 0; i < d.detections.size(); ++i) {
    const Detection& b = d.detections[i];
    s += fmt::format("  {} {:.3f} [{:.1f}, {:.1f}, {:.1f}, {:.1f}]\n",
                     d.labels[i].empty() ? "class " + std::to_string(b.cls) : d.labels[i], b.score,
                     b.x1, b.y1, b.x2, b.y2);
  }
  return s;
}

}  // namespace ferry::prep
