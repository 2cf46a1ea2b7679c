// `ferry prep embed` (prep/embed.h): the spec's image steps as ONNX nodes before the model.
//
// What ONNX reproduces, measured against ONNX Runtime 1.30 (tests/prep/test_embed.py repeats
// the measurement, so a new ONNX Runtime that changes it fails the test):
// - nearest filters: exact, but not through Resize: ONNX Runtime computes Resize's source
//   coordinate in float, and floor() of it differs from OpenCV's double arithmetic or Pillow's
//   accumulated double at some sizes (up to 12% of elements, 244 of 255). So the indices are
//   computed in double with the library's own steps (Div, Mul / CumSum, Floor) and gathered.
// - every other filter: refused. ONNX Resize (linear / cubic, half_pixel, antialias at opset
//   18) on float then Round differs from each library in more than 0.1% of the elements
//   (torchvision_bilinear: 3.8%, cv2_linear: 12.7%; torchvision_bilinear_aa, pil_bilinear: up
//   to 16 of 255, pil_bicubic: 12); pil_box, pil_lanczos, cv2_area, cv2_lanczos4 have no
//   Resize mode.
// - letterbox (nearest filters): the pipeline's scale and sizes in double, Round, then Pad.
// - center crop (Slice at torchvision's offsets, Round half to even), channel order (Gather),
//   float conversion (Cast, Mul, Sub, Div: float32 step by step, as the pipeline rounds),
//   layout (Transpose), batch axis (Squeeze): exact.
#include "prep/embed.h"

#include <algorithm>

#include "passes/convert.h"
#include "passes/graph_util.h"

namespace ferry::prep {

namespace {

// Why a filter cannot be embedded (measured, see the top of this file); "" when it can.
std::string FilterRefusal(Filter f) {
  switch (f) {
    case Filter::kPilNearest:
    case Filter::kCv2Nearest:
    case Filter::kCv2NearestExact:
      return "";
    case Filter::kTorchvisionBilinear:
      return "ONNX Resize (linear, half_pixel) then Round differs from torchvision by 1 in up to "
             "3.8% of the elements (ONNX Runtime 1.30), over the bar (>= 99.9% exact)";
    case Filter::kCv2Linear:
      return "ONNX Resize (linear, half_pixel) is not OpenCV's 11-bit fixed point: off by 1 in "
             "up to 12.7% of the elements (ONNX Runtime 1.30)";
    case Filter::kCv2Cubic:
      return "ONNX Resize (cubic, a = -0.75) is not OpenCV 5.1's float cubic, and ONNX Runtime "
             "1.30 refuses cubic on NCHW with a reduction";
    case Filter::kTorchvisionBilinearAa:
    case Filter::kPilBilinear:
    case Filter::kPilBicubic:
      return "ONNX Resize with antialias (opset 18) differs from it by up to 16 of 255 "
             "(ONNX Runtime 1.30: the library rounds each pass, or weighs the taps differently)";
    case Filter::kPilBox:
    case Filter::kPilLanczos:
    case Filter::kCv2Area:
    case Filter::kCv2Lanczos4:
      return "ONNX Resize has no such mode";
  }
  return "not measured";
}

ir::Attribute IntAttr(const std::string& name, int64_t v) {
  ir::Attribute a;
  a.name = name;
  a.type = ir::AttrType::kInt;
  a.i = v;
  return a;
}
ir::Attribute IntsAttr(const std::string& name, std::vector<int64_t> v) {
  ir::Attribute a;
  a.name = name;
  a.type = ir::AttrType::kInts;
  a.ints = std::move(v);
  return a;
}

// Appends nodes and constants to a graph under fresh names derived from `prefix`.
class Builder {
 public:
  Builder(ir::Graph& g, std::string prefix) : g_(g), prefix_(std::move(prefix)) {}

  template <typename T>
  std::string Const(const std::vector<T>& v, Shape shape, const std::string& what) {
    std::string name = passes::FreshName(g_, prefix_ + "/" + what);
    g_.initializers.push_back({name, Tensor::FromVector<T>(v, std::move(shape)), ""});
    return name;
  }
  std::string I64(int64_t v) { return Const<int64_t>({v}, {}, "i"); }
  std::string I64s(std::vector<int64_t> v) {
    Shape s{static_cast<int64_t>(v.size())};
    return Const<int64_t>(v, s, "ints");
  }
  std::string F64(double v) { return Const<double>({v}, {}, "d"); }

  std::string Op(const std::string& op, std::vector<std::string> inputs,
                 const std::string& out = "") {
    ir::Node n;
    n.op_type = op;
    n.name = fmt::format("{}/{}_{}", prefix_, op, nodes_++);  // unique among ours
    n.inputs = std::move(inputs);
    n.outputs = {out.empty() ? passes::FreshName(g_, n.name + ":0") : out};
    std::string result = n.outputs[0];
    g_.nodes.push_back(std::move(n));
    return result;
  }
  // The same with one attribute.
  std::string Op(const std::string& op, std::vector<std::string> inputs, ir::Attribute attr) {
    std::string result = Op(op, std::move(inputs));
    g_.nodes.back().attributes.push_back(std::move(attr));
    return result;
  }
  std::string Cast(const std::string& x, DType to) {
    return Op("Cast", {x}, IntAttr("to", static_cast<int64_t>(OnnxCode(to))));
  }
  // dims[axis] of x as an int64 scalar.
  std::string Dim(const std::string& x, int64_t axis) {
    return Op("Gather", {Op("Shape", {x}), I64(axis)}, IntAttr("axis", 0));
  }
  std::string Vec1(const std::string& scalar) { return Op("Reshape", {scalar, I64s({1})}); }

 private:
  static int OnnxCode(DType t) {
    switch (t) {
      case DType::kFloat:
        return 1;
      case DType::kUint8:
        return 2;
      case DType::kInt64:
        return 7;
      case DType::kDouble:
        return 11;
      default:
        return 0;
    }
  }
  ir::Graph& g_;
  std::string prefix_;
  int nodes_ = 0;
};

// The library's nearest source indices for one axis, as an int64 vector: OpenCV's INTER_NEAREST
// floor(d * (1 / (out / in))) in double, or Pillow's NEAREST (= OpenCV's NEAREST_EXACT) source
// centres accumulated in double (CumSum of step / 2, step, step...) and truncated; clamped.
std::string NearestIndex(Builder& b, Filter f, const std::string& in, const std::string& out) {
  std::string in_d = b.Cast(in, DType::kDouble), out_d = b.Cast(out, DType::kDouble);
  std::string pos;
  if (f == Filter::kCv2Nearest) {
    std::string inv = b.Op("Div", {b.F64(1.0), b.Op("Div", {out_d, in_d})});
    std::string d = b.Op("Range", {b.F64(0.0), out_d, b.F64(1.0)});
    pos = b.Op("Mul", {d, inv});
  } else {
    std::string step = b.Op("Div", {in_d, out_d});
    std::string first = b.Vec1(b.Op("Mul", {step, b.F64(0.5)}));
    std::string rest = b.Op("Expand", {step, b.Vec1(b.Op("Sub", {out, b.I64(1)}))});
    pos = b.Op("CumSum", {b.Op("Concat", {first, rest}, IntAttr("axis", 0)), b.I64(0)});
  }
  std::string idx = b.Cast(b.Op("Floor", {pos}), DType::kInt64);
  idx = b.Op("Min", {idx, b.Op("Sub", {in, b.I64(1)})});
  return b.Op("Max", {idx, b.I64(0)});
}

// torchvision's _compute_resized_output_size in int64 (prep/spec.h ResizeSpec): (out_h, out_w).
std::pair<std::string, std::string> KeepAspectSizes(Builder& b, const ResizeSpec& r,
                                                    const std::string& h, const std::string& w) {
  std::string short_side = b.Op("Min", {h, w}), long_side = b.Op("Max", {h, w});
  std::string new_short, new_long;
  if (r.shorter_side > 0) {
    new_short = b.I64(r.shorter_side);
    new_long = b.Op("Div", {b.Op("Mul", {new_short, long_side}), short_side});
    if (r.longer_side > 0) {
      std::string m = b.I64(r.longer_side);
      std::string over = b.Op("Greater", {new_long, m});
      new_short =
          b.Op("Where", {over, b.Op("Div", {b.Op("Mul", {m, new_short}), new_long}), new_short});
      new_long = b.Op("Where", {over, m, new_long});
    }
  } else {
    new_long = b.I64(r.longer_side);
    new_short = b.Op("Div", {b.Op("Mul", {new_long, short_side}), long_side});
  }
  std::string w_le_h = b.Op("Not", {b.Op("Greater", {w, h})});
  return {b.Op("Where", {w_le_h, new_long, new_short}),
          b.Op("Where", {w_le_h, new_short, new_long})};
}

// Refusals, before anything is built: the first step of `in` that ONNX cannot reproduce.
Status Embeddable(const InputSpec& in) {
  const std::string key = "inputs '" + in.name + "'";
  if (in.is_table())
    return UnsupportedError("{}: table inputs are not embedded (only image steps)", key);
  if (in.is_text())
    return UnsupportedError("{}: text inputs are not embedded (tokenizers are not ONNX ops)", key);
  const ImageSpec& s = in.image;
  if (s.exif == ExifMode::kApply)
    return UnsupportedError(
        "{}: image.decode.exif: apply cannot be embedded: EXIF orientation happens while "
        "decoding, before the pixels the embedded model takes (orient the image before feeding "
        "it and say exif: ignore)",
        key);
  if (s.composite_alpha)
    return UnsupportedError(
        "{}: image.alpha.composite cannot be embedded: alpha is handled while decoding, and the "
        "embedded model takes RGB pixels",
        key);
  if (s.color == Color::kGray)
    return UnsupportedError(
        "{}: image.color: gray cannot be embedded: the library's fixed-point luma (and a gray "
        "source's replication) happen on the decoded image before it has 3 channels",
        key);
  if (s.resize && (s.resize->line_height || s.resize->min_side || s.resize->max_side))
    return UnsupportedError(
        "{}: image.resize.{} cannot be embedded: not written as ONNX shape arithmetic yet", key,
        s.resize->line_height ? "height"
        : s.resize->min_side  ? "min_side"
                              : "max_side");
  if (s.resize && s.resize->round_half_even)
    return UnsupportedError(
        "{}: image.resize.round: half_even cannot be embedded: not written as ONNX shape "
        "arithmetic yet",
        key);
  if (s.resize && s.resize->top_left)
    return UnsupportedError(
        "{}: image.resize.fit: letterbox_top_left cannot be embedded: not written as ONNX yet",
        key);
  if (s.resize && s.resize->pad_square)
    return UnsupportedError(
        "{}: image.resize.fit: pad_to_square cannot be embedded: not written as an ONNX Pad yet",
        key);
  if (s.pad_height)
    return UnsupportedError("{}: image.pad cannot be embedded: not written as an ONNX Pad yet",
                            key);
  if (s.normalize_f64)
    return UnsupportedError(
        "{}: image.normalize_dtype: float64 cannot be embedded: not written as ONNX double "
        "arithmetic yet",
        key);
  if (s.divide > 0)
    return UnsupportedError(
        "{}: image.scale.divide cannot be embedded: not written as an ONNX Div yet", key);
  if (s.resize) {
    std::string why = FilterRefusal(s.resize->filter);
    if (!why.empty())
      return UnsupportedError("{}: image.resize.filter {} cannot be embedded: {}", key,
                              FilterName(s.resize->filter), why);
    if (!s.resize->keep_aspect() && s.crop_height &&
        (s.crop_height > s.resize->height || s.crop_width > s.resize->width))
      return InvalidError("{}: image.crop.center [{}, {}] is larger than resize.size [{}, {}]", key,
                          s.crop_height, s.crop_width, s.resize->height, s.resize->width);
  }
  return Status::Ok();
}

std::string DimsString(const std::vector<int64_t>& dims) {
  std::string s;
  for (int64_t d : dims)
    s += (s.empty() ? "" : ", ") + (d < 0 ? std::string("?") : std::to_string(d));
  return "[" + s + "]";
}

}  // namespace

Result<EmbedResult> EmbedSpec(ir::Model& model, const Spec& spec, const EmbedOptions& options) {
  if (spec.inputs.empty()) return InvalidError("{}: the spec has no inputs", spec.path);
  ir::Graph& g0 = model.graph;
  for (const auto& in : spec.inputs) {
    FERRY_RETURN_IF_ERROR(Embeddable(in));
    const ir::ValueInfo* vi = nullptr;
    for (const auto* r : g0.RealInputs())
      if (r->name == in.name) vi = r;
    if (!vi)
      return InvalidError("spec input '{}' is not an input of the model (it has: {})", in.name,
                          [&] {
                            std::string s;
                            for (const auto* r : g0.RealInputs())
                              s += (s.empty() ? "" : ", ") + r->name;
                            return s;
                          }());
    const ImageSpec& s = in.image;
    if (vi->type.kind != ir::TypeInfo::Kind::kTensor || vi->type.elem_type != s.dtype)
      return InvalidError("model input '{}' is {}, the spec makes {}", in.name, vi->type.ToString(),
                          DTypeName(s.dtype));
    std::vector<int64_t> want = OutputShape(s);
    if (vi->type.shape) {
      const auto& dims = *vi->type.shape;
      if (dims.size() != want.size())
        return InvalidError("model input '{}' has rank {}, the spec makes {} {}", in.name,
                            dims.size(), want.size(), DimsString(want));
      for (size_t k = 0; k < dims.size(); ++k)
        if (dims[k].known() && want[k] >= 0 && *dims[k].value != want[k] && !(k == 0 && s.batch))
          return InvalidError("model input '{}' has dims {}, the spec makes {}", in.name,
                              vi->type.ToString(), DimsString(want));
    }
  }
  // Standard forms from opset 13 (Squeeze/Unsqueeze axes as inputs); older models move up.
  int64_t opset = model.OpsetFor("").value_or(0);
  if (opset < 13) {
    FERRY_RETURN_IF_ERROR(passes::ConvertOpset(model, 13));
    opset = 13;
  }
  ir::Graph& g = model.graph;
  EmbedResult result;
  result.opset = opset;
  for (const auto& in : spec.inputs) {
    const ImageSpec& s = in.image;
    EmbeddedInput info;
    info.name = in.name;
    auto it = std::find_if(g.inputs.begin(), g.inputs.end(),
                           [&](const ir::ValueInfo& v) { return v.name == in.name; });
    const ir::ValueInfo model_input = *it;
    // The model's own input becomes an internal value fed by the chain.
    const std::string fed = passes::FreshName(g, in.name + "__model_input");
    passes::RenameReads(g, in.name, fed);
    Builder b(g, in.name + "__prep");
    // The raw input: [1,] H, W, 3 uint8; H and W symbolic when the steps fix the size.
    bool dynamic = s.resize.has_value() || s.crop_height > 0;
    std::vector<int64_t> want = OutputShape(s);
    const int64_t hw_offset = s.batch ? 1 : 0;
    const int64_t h_at = hw_offset + (s.layout == Layout::kChw ? 1 : 0);
    ir::ValueInfo raw;
    raw.name = in.name;
    raw.type.kind = ir::TypeInfo::Kind::kTensor;
    raw.type.elem_type = DType::kUint8;
    std::vector<ir::Dim> dims;
    if (s.batch) dims.push_back({1, ""});
    for (int k = 0; k < 2; ++k) {
      ir::Dim d;
      int64_t v = want[static_cast<size_t>(h_at + k)];
      if (!dynamic && v < 0 && model_input.type.shape) {
        const auto& md = (*model_input.type.shape)[static_cast<size_t>(h_at + k)];
        if (md.known()) v = *md.value;
      }
      if (!dynamic && v > 0)
        d.value = v;
      else
        d.symbol = k == 0 ? in.name + "_height" : in.name + "_width";
      dims.push_back(d);
    }
    dims.push_back({3, ""});
    raw.type.shape = dims;
    raw.doc_string = "decoded image, uint8 HWC RGB (ferry prep embed)";
    for (const auto& d : dims) info.dims.push_back(d.ToString());
    *it = raw;

    std::string x = in.name;
    if (!s.batch) x = b.Op("Unsqueeze", {x, b.I64s({0})});
    info.steps.push_back(fmt::format("input: uint8 {} (decoded RGB, decode.exif: ignore)", [&] {
      std::string t;
      for (const auto& d : info.dims) t += (t.empty() ? "" : ", ") + d;
      return "[" + t + "]";
    }()));
    std::string h = b.Dim(x, 1), w = b.Dim(x, 2);
    if (s.resize) {
      std::string oh, ow;
      if (s.resize->letterbox) {
        // Scaled by r = min(H / h, W / w) to Round(h r), Round(w r) (half to even, in double,
        // clamped to [1, H] / [1, W]), as the pipeline computes it.
        std::string H = b.I64(s.resize->height), W = b.I64(s.resize->width);
        std::string h_d = b.Cast(h, DType::kDouble), w_d = b.Cast(w, DType::kDouble);
        std::string r = b.Op("Min", {b.Op("Div", {b.Cast(H, DType::kDouble), h_d}),
                                     b.Op("Div", {b.Cast(W, DType::kDouble), w_d})});
        auto scaled = [&](const std::string& size_d, const std::string& limit) {
          std::string n = b.Cast(b.Op("Round", {b.Op("Mul", {size_d, r})}), DType::kInt64);
          return b.Op("Max", {b.Op("Min", {n, limit}), b.I64(1)});
        };
        oh = scaled(h_d, H);
        ow = scaled(w_d, W);
      } else if (s.resize->keep_aspect()) {
        std::tie(oh, ow) = KeepAspectSizes(b, *s.resize, h, w);
      } else {
        oh = b.I64(s.resize->height);
        ow = b.I64(s.resize->width);
      }
      x = b.Op("Gather", {x, NearestIndex(b, s.resize->filter, h, oh)}, IntAttr("axis", 1));
      x = b.Op("Gather", {x, NearestIndex(b, s.resize->filter, w, ow)}, IntAttr("axis", 2));
      h = oh, w = ow;
      info.steps.push_back(
          fmt::format("resize {}: source indices in double as the library computes them, Gather",
                      FilterName(s.resize->filter)));
      if (s.resize->letterbox) {
        // Padded to [H, W] with pad_value, the top / left getting floor(pad / 2).
        std::string H = b.I64(s.resize->height), W = b.I64(s.resize->width);
        std::string dh = b.Op("Sub", {H, h}), dw = b.Op("Sub", {W, w});
        std::string top = b.Op("Div", {dh, b.I64(2)}), left = b.Op("Div", {dw, b.I64(2)});
        std::string zero = b.I64s({0});
        std::string pads =
            b.Op("Concat",
                 {zero, b.Vec1(top), b.Vec1(left), zero, zero, b.Vec1(b.Op("Sub", {dh, top})),
                  b.Vec1(b.Op("Sub", {dw, left})), zero},
                 IntAttr("axis", 0));
        std::string value =
            b.Const<uint8_t>({static_cast<uint8_t>(s.resize->pad_value)}, {}, "pad_value");
        x = b.Op("Pad", {x, pads, value});
        h = H, w = W;
        info.steps.push_back(fmt::format(
            "letterbox [{}, {}]: scale min(H / h, W / w), sizes Round (half to even), Pad with "
            "{} (top / left floor(pad / 2))",
            s.resize->height, s.resize->width, s.resize->pad_value));
      }
    }
    if (s.crop_height) {
      const char* rounding = s.crop_floor ? "Floor" : "Round";  // crop.round
      auto offset = [&](const std::string& size, int64_t crop) {
        std::string d = b.Cast(b.Op("Sub", {size, b.I64(crop)}), DType::kDouble);
        return b.Vec1(b.Cast(b.Op(rounding, {b.Op("Div", {d, b.F64(2.0)})}), DType::kInt64));
      };
      std::string starts =
          b.Op("Concat", {offset(h, s.crop_height), offset(w, s.crop_width)}, IntAttr("axis", 0));
      std::string ends = b.Op("Add", {starts, b.I64s({s.crop_height, s.crop_width})});
      x = b.Op("Slice", {x, starts, ends, b.I64s({1, 2})});
      info.steps.push_back(fmt::format("center crop [{}, {}]: Slice at {}((size - crop) / 2)",
                                       s.crop_height, s.crop_width,
                                       s.crop_floor ? "floor" : "round"));
    }
    if (s.color == Color::kBgr) {
      x = b.Op("Gather", {x, b.I64s({2, 1, 0})}, IntAttr("axis", 3));
      info.steps.push_back("bgr: Gather [2, 1, 0] on the channel axis");
    }
    if (s.dtype == DType::kFloat) {
      x = b.Cast(x, DType::kFloat);
      std::string what = "float32";
      if (s.scale != 1.0) {
        x = b.Op("Mul", {x, b.Const<float>({static_cast<float>(s.scale)}, {}, "scale")});
        what += fmt::format(", * {}", s.scale);
      }
      auto per_channel = [&](const std::vector<double>& v, const char* name) {
        std::vector<float> f;
        for (double d : v) f.push_back(static_cast<float>(d));
        return b.Const<float>(f, {static_cast<int64_t>(f.size())}, name);
      };
      if (!s.mean.empty()) {
        x = b.Op("Sub", {x, per_channel(s.mean, "mean")});
        what += " - mean";
      }
      if (!s.std.empty()) {
        x = b.Op("Div", {x, per_channel(s.std, "std")});
        what += " / std";
      }
      info.steps.push_back(what + ": Cast, Mul, Sub, Div in float32");
    }
    if (s.layout == Layout::kChw) {
      x = b.Op("Transpose", {x}, IntsAttr("perm", {0, 3, 1, 2}));
      info.steps.push_back("layout chw: Transpose");
    }
    if (!s.batch) x = b.Op("Squeeze", {x, b.I64s({0})});
    b.Op("Identity", {x}, fed);
    if (options.keep_prep_outputs) {
      info.prep_output = passes::FreshName(g, in.name + "__prep");
      b.Op("Identity", {fed}, info.prep_output);
      ir::ValueInfo o;
      o.name = info.prep_output;
      o.type.kind = ir::TypeInfo::Kind::kTensor;
      o.type.elem_type = s.dtype;
      g.outputs.push_back(o);
    }
    result.inputs.push_back(std::move(info));
  }
  passes::TopoSort(g);
  return result;
}

void DropPrepOutputs(ir::Model& model, const EmbedResult& result) {
  for (const auto& in : result.inputs) {
    if (in.prep_output.empty()) continue;
    auto& outs = model.graph.outputs;
    outs.erase(std::remove_if(outs.begin(), outs.end(),
                              [&](const ir::ValueInfo& v) { return v.name == in.prep_output; }),
               outs.end());
    auto& nodes = model.graph.nodes;
    nodes.erase(std::remove_if(nodes.begin(), nodes.end(),
                               [&](const ir::Node& n) {
                                 return n.outputs.size() == 1 && n.outputs[0] == in.prep_output;
                               }),
                nodes.end());
  }
}

}  // namespace ferry::prep
