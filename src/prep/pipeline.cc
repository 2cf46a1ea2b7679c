// The image pipeline (prep/pipeline.h). Float conversion compiles with -ffp-contract=off so
// (x * scale - mean) / std rounds like the NumPy float32 reference, step by step.
#include "prep/pipeline.h"

#include <algorithm>
#include <array>
#include <chrono>
#include <cmath>
#include <cstring>
#include <filesystem>

#include "core/npy.h"
#include "prep/resize.h"
#include "prep/table.h"
#include "prep/text.h"

namespace ferry::prep {

namespace {

// torchvision's _compute_resized_output_size(image_size, [shorter], max_size=longer) as (H, W)
// (spec.h ResizeSpec): Python's int() of true divisions, which double reproduces exactly.
// half_even (shorter alone): PaddleClas's ResizeImage: percent = N / short, each side
// round(side * percent), Python's round (ties to even: nearbyint in the default mode).
std::pair<int64_t, int64_t> KeepAspect(int64_t h, int64_t w, int64_t shorter, int64_t longer,
                                       bool half_even) {
  const int64_t short_side = w <= h ? w : h, long_side = w <= h ? h : w;
  int64_t new_short, new_long;
  if (half_even) {
    const double percent = static_cast<double>(shorter) / static_cast<double>(short_side);
    new_short = static_cast<int64_t>(std::nearbyint(static_cast<double>(short_side) * percent));
    new_long = static_cast<int64_t>(std::nearbyint(static_cast<double>(long_side) * percent));
  } else if (shorter > 0) {
    new_short = shorter;
    new_long = static_cast<int64_t>(static_cast<double>(shorter * long_side) /
                                    static_cast<double>(short_side));
    if (longer > 0 && new_long > longer) {
      new_short = static_cast<int64_t>(static_cast<double>(longer * new_short) /
                                       static_cast<double>(new_long));
      new_long = longer;
    }
  } else {
    new_long = longer;
    new_short = static_cast<int64_t>(static_cast<double>(longer * short_side) /
                                     static_cast<double>(long_side));
  }
  if (w <= h) return {new_long, new_short};
  return {new_short, new_long};
}

DecodeOptions DecodeOptionsFor(const ImageSpec& spec) {
  DecodeOptions o;
  o.apply_exif = spec.exif == ExifMode::kApply;
  o.max_pixels = spec.max_pixels;
  o.composite_alpha = spec.composite_alpha;
  std::copy(spec.background, spec.background + 3, o.background);
  return o;
}

// Python's round() (ties to even) of a non-negative half-integer or integer.
int64_t RoundHalfEven(int64_t twice) {
  int64_t q = twice / 2;
  if (twice % 2 == 0) return q;
  return q % 2 == 0 ? q : q + 1;
}

}  // namespace

Image ToGray(const Image& rgb, Library library) {
  Image out(rgb.height, rgb.width, 1);
  const size_t n = static_cast<size_t>(rgb.height * rgb.width);
  const uint8_t* s = rgb.pixels.data();
  uint8_t* d = out.pixels.data();
  for (size_t i = 0; i < n; ++i, s += 3) {
    if (library == Library::kPil)
      d[i] = static_cast<uint8_t>((s[0] * 19595 + s[1] * 38470 + s[2] * 7471 + 0x8000) >> 16);
    else
      d[i] = static_cast<uint8_t>((s[0] * 9798 + s[1] * 19235 + s[2] * 3735 + (1 << 14)) >> 15);
  }
  return out;
}

Result<Tensor> PreprocessImage(const ImageSpec& spec, const Image& decoded, const std::string& what,
                               double batch_wh_ratio) {
  const Image* img = &decoded;
  Image tmp;
  // resize.tensor: float: the resized image as unrounded floats (interleaved, img's channels).
  std::vector<float> fpix;
  bool use_float = false;
  int64_t cur_h = 0, cur_w = 0;
  int64_t pad_w = 0;  // pad.grow: the grown box width
  if (spec.color == Color::kGray && decoded.channels == 3 && !spec.gray_after_resize) {
    tmp = ToGray(decoded, spec.library);
    img = &tmp;
  }
  if (spec.resize && spec.resize->letterbox) {
    const int64_t H = spec.resize->height, W = spec.resize->width;
    if (H < 1 || W < 1 || H > 65536 || W > 65536 || H * W > spec.max_pixels)
      return InvalidError("{}: letterbox to {}x{} out of range (1..65536, decode.max_pixels {})",
                          what, H, W, spec.max_pixels);
    const double r = std::min(static_cast<double>(H) / static_cast<double>(img->height),
                              static_cast<double>(W) / static_cast<double>(img->width));
    // ultralytics rounds (ties to even); YOLOX (top_left) truncates with int().
    auto side = [&](int64_t n) {
      const double x = static_cast<double>(n) * r;
      return static_cast<int64_t>(spec.resize->top_left ? std::floor(x) : std::nearbyint(x));
    };
    const int64_t nh = std::clamp<int64_t>(side(img->height), 1, H);
    const int64_t nw = std::clamp<int64_t>(side(img->width), 1, W);
    Image scaled;
    const Image* src = img;
    if (nh != img->height || nw != img->width) {
      scaled = Resize(*img, nh, nw, spec.resize->filter);
      src = &scaled;
    }
    const int64_t pad_top = spec.resize->top_left ? 0 : (H - nh) / 2;
    const int64_t pad_left = spec.resize->top_left ? 0 : (W - nw) / 2;
    Image boxed(H, W, src->channels);
    std::fill(boxed.pixels.begin(), boxed.pixels.end(),
              static_cast<uint8_t>(spec.resize->pad_value));
    const size_t row_bytes = static_cast<size_t>(nw * src->channels);
    for (int64_t y = 0; y < nh; ++y)
      std::memcpy(boxed.row(y + pad_top) + pad_left * src->channels, src->row(y), row_bytes);
    tmp = std::move(boxed);
    img = &tmp;
  } else if (spec.resize) {
    if (spec.resize->pad_square) {
      // fit: pad_to_square: bottom / right padding to the longer side (cv2.copyMakeBorder).
      const int64_t S = std::max(img->height, img->width);
      if (S * S > spec.max_pixels)
        return InvalidError("{}: pad_to_square {}x{} is over decode.max_pixels ({})", what, S, S,
                            spec.max_pixels);
      Image sq(S, S, img->channels);
      std::fill(sq.pixels.begin(), sq.pixels.end(), static_cast<uint8_t>(spec.resize->pad_value));
      const size_t row_bytes = static_cast<size_t>(img->width * img->channels);
      for (int64_t y = 0; y < img->height; ++y) std::memcpy(sq.row(y), img->row(y), row_bytes);
      tmp = std::move(sq);
      img = &tmp;
    }
    int64_t h = spec.resize->height, w = spec.resize->width;
    const ResizeSpec& rs = *spec.resize;
    const double ih = static_cast<double>(img->height), iw = static_cast<double>(img->width);
    if (rs.line_height > 0) {
      // PaddleOCR's resize_norm_img: ratio = w / float(h); ceil(H * ratio) (or int()), capped.
      const double H = static_cast<double>(rs.line_height);
      const double x = rs.ratio_first ? H * (iw / ih) : iw * (H / ih);
      h = rs.line_height;
      w = static_cast<int64_t>(rs.width_ceil ? std::ceil(x) : std::floor(x));
      if (spec.pad_grow) {
        // rapidocr: the box is int(N * max(W / N, w / h)) wide (w / h: the batch's widest with
        // grow: batch); the line is capped at it.
        const double box_ratio =
            std::max({static_cast<double>(spec.pad_width) / H, iw / ih, batch_wh_ratio});
        pad_w = static_cast<int64_t>(std::floor(H * box_ratio));
        w = std::min(w, pad_w);
      } else if (rs.max_width > 0 && w > rs.max_width) {
        w = rs.max_width;
      }
    } else if (rs.min_side > 0 || rs.max_side > 0) {
      // PaddleOCR's DetResizeForTest: ratio from the limit, int() of each side, then
      // round(side / m) * m with Python's round (ties to even; nearbyint in the default mode).
      double ratio = 1.0;
      if (rs.min_side > 0 && std::min(ih, iw) < static_cast<double>(rs.min_side))
        ratio = static_cast<double>(rs.min_side) / (ih < iw ? ih : iw);
      if (rs.max_side > 0 && std::max(ih, iw) > static_cast<double>(rs.max_side))
        ratio = static_cast<double>(rs.max_side) / (ih > iw ? ih : iw);
      const double m = static_cast<double>(rs.multiple_of);
      h = static_cast<int64_t>(
              std::nearbyint(static_cast<double>(static_cast<int64_t>(ih * ratio)) / m)) *
          rs.multiple_of;
      w = static_cast<int64_t>(
              std::nearbyint(static_cast<double>(static_cast<int64_t>(iw * ratio)) / m)) *
          rs.multiple_of;
    } else if (spec.resize->keep_aspect()) {
      auto hw = KeepAspect(img->height, img->width, spec.resize->shorter_side,
                           spec.resize->longer_side, spec.resize->round_half_even);
      h = hw.first;
      w = hw.second;
    }
    if (h < 1 || w < 1 || h > 65536 || w > 65536)
      return InvalidError("{}: resize to {}x{} out of range (1..65536)", what, h, w);
    if (h * w > spec.max_pixels)
      return InvalidError("{}: resize to {}x{} is over decode.max_pixels ({})", what, h, w,
                          spec.max_pixels);
    if (spec.resize->float_tensor) {  // (at the same size too: to_tensor's values)
      // torchvision on a float tensor: the resized values stay unrounded (spec.h).
      // The float tensor's values: to_tensor's p / 255 when scale is 1/255, else p * scale.
      std::array<float, 256> value;
      const bool to_tensor = std::fabs(spec.scale - 1.0 / 255.0) < 1e-15;
      for (int p = 0; p < 256; ++p)
        value[p] = spec.divide > 0 ? static_cast<float>(p) / static_cast<float>(spec.divide)
                   : to_tensor     ? static_cast<float>(p) / 255.0f
                                   : static_cast<float>(p) * static_cast<float>(spec.scale);
      fpix = TorchvisionResizeFloat(*img, h, w,
                                    spec.resize->filter == Filter::kTorchvisionBilinearAa, value);
      use_float = true;
      cur_h = h, cur_w = w;
    } else if (h != img->height || w != img->width) {
      tmp = Resize(*img, h, w, spec.resize->filter);
      img = &tmp;
    }
  }
  if (spec.color == Color::kGray && img->channels == 3 && spec.gray_after_resize) {
    Image gray = ToGray(*img, spec.library);  // gray: after_resize
    tmp = std::move(gray);
    img = &tmp;
  }
  if (!use_float) cur_h = img->height, cur_w = img->width;
  int64_t top = 0, left = 0, oh = cur_h, ow = cur_w;
  if (spec.crop_height) {
    if (spec.crop_height > cur_h || spec.crop_width > cur_w)
      return InvalidError("{}: crop.center [{}, {}] is larger than the image ({}x{} after resize)",
                          what, spec.crop_height, spec.crop_width, cur_h, cur_w);
    // torchvision's CenterCrop: int(round((size - crop) / 2.0)), Python's ties-to-even round;
    // crop.round: floor: (size - crop) // 2.
    top =
        spec.crop_floor ? (cur_h - spec.crop_height) / 2 : RoundHalfEven(cur_h - spec.crop_height);
    left = spec.crop_floor ? (cur_w - spec.crop_width) / 2 : RoundHalfEven(cur_w - spec.crop_width);
    oh = spec.crop_height;
    ow = spec.crop_width;
  }
  // Output channels: src channel per output channel (gray sources replicate for rgb/bgr).
  const int64_t oc = spec.color == Color::kGray ? 1 : 3;
  int64_t src_c[3] = {0, 0, 0};
  if (img->channels == 3) {
    if (spec.color == Color::kBgr) {
      src_c[0] = 2, src_c[2] = 0, src_c[1] = 1;
    } else {
      src_c[0] = 0, src_c[1] = 1, src_c[2] = 2;
    }
  }
  // pad.to: the image at the top left of a [pad_height, pad_width] canvas of pad_value.
  int64_t th = oh, tw = ow;
  if (spec.pad_height) {
    if (pad_w == 0) pad_w = spec.pad_width;
    if (oh > spec.pad_height || ow > pad_w)
      return InvalidError("{}: the image ({}x{} after resize) is larger than pad.to [{}, {}]", what,
                          oh, ow, spec.pad_height, pad_w);
    th = spec.pad_height;
    tw = pad_w;
  }
  Shape shape = spec.layout == Layout::kChw ? Shape{oc, th, tw} : Shape{th, tw, oc};
  if (spec.batch) shape.insert(shape.begin(), 1);
  Tensor t = Tensor::Uninitialized(spec.dtype, shape);
  const int64_t ic = img->channels;
  auto index = [&](int64_t y, int64_t x, int64_t c) {
    return spec.layout == Layout::kChw ? (c * th + y) * tw + x : (y * tw + x) * oc + c;
  };
  if (spec.pad_height) {
    if (spec.dtype == DType::kUint8)
      std::fill(t.data<uint8_t>(), t.data<uint8_t>() + t.size(),
                static_cast<uint8_t>(spec.pad_value));
    else
      std::fill(t.data<float>(), t.data<float>() + t.size(), static_cast<float>(spec.pad_value));
  }
  if (spec.dtype == DType::kUint8) {
    uint8_t* d = t.data<uint8_t>();
    for (int64_t y = 0; y < oh; ++y) {
      const uint8_t* s = img->row(y + top) + left * ic;
      for (int64_t x = 0; x < ow; ++x)
        for (int64_t c = 0; c < oc; ++c) d[index(y, x, c)] = s[x * ic + src_c[c]];
    }
    return t;
  }
  float scale = static_cast<float>(spec.scale);
  const bool divide = spec.divide > 0;  // scale: {divide: D}: NumPy's img / D in float32
  const float divisor = static_cast<float>(spec.divide);
  float mean[3] = {0, 0, 0}, stdv[3] = {1, 1, 1};
  for (int64_t c = 0; c < oc; ++c) {
    if (!spec.mean.empty()) mean[c] = static_cast<float>(spec.mean[spec.mean.size() == 1 ? 0 : c]);
    if (!spec.std.empty()) stdv[c] = static_cast<float>(spec.std[spec.std.size() == 1 ? 0 : c]);
  }
  const bool has_mean = !spec.mean.empty(), has_std = !spec.std.empty();
  float* d = t.data<float>();
  for (int64_t y = 0; y < oh; ++y) {
    const uint8_t* s = use_float ? nullptr : img->row(y + top) + left * ic;
    const float* f = use_float ? fpix.data() + ((y + top) * cur_w + left) * ic : nullptr;
    for (int64_t x = 0; x < ow; ++x)
      for (int64_t c = 0; c < oc; ++c) {
        float v = use_float ? f[x * ic + src_c[c]]  // the float path's values carry the scale
                  : divide  ? static_cast<float>(s[x * ic + src_c[c]]) / divisor
                            : static_cast<float>(s[x * ic + src_c[c]]) * scale;
        if (spec.normalize_f64) {  // normalize_dtype: float64
          double dv = static_cast<double>(v);
          if (has_mean) dv = dv - spec.mean[spec.mean.size() == 1 ? 0 : c];
          if (has_std) dv = dv / spec.std[spec.std.size() == 1 ? 0 : c];
          v = static_cast<float>(dv);
        } else {
          if (has_mean) v = v - mean[c];
          if (has_std) v = v / stdv[c];
        }
        d[index(y, x, c)] = v;
      }
  }
  return t;
}

Result<Tensor> Preprocess(const ImageSpec& spec, std::string_view bytes, const std::string& what,
                          ImageInfo* info, double batch_wh_ratio) {
  const DecodeOptions o = DecodeOptionsFor(spec);
  FERRY_ASSIGN_OR_RETURN(Image img, DecodeImage(bytes, o, what));
  if (info) *info = {img.height, img.width};
  return PreprocessImage(spec, img, what, batch_wh_ratio);
}

Result<PrepTiming> TimePreprocess(const ImageSpec& spec, std::string_view bytes,
                                  const std::string& what, int runs, int warmup) {
  using Clock = std::chrono::steady_clock;
  auto ms = [](Clock::time_point a, Clock::time_point b) {
    return std::chrono::duration<double, std::milli>(b - a).count();
  };
  auto pct = [](std::vector<double> v, double p) {
    std::sort(v.begin(), v.end());
    return v[std::min(v.size() - 1, static_cast<size_t>(p * static_cast<double>(v.size())))];
  };
  PrepTiming t;
  t.runs = std::max(1, runs);
  const DecodeOptions o = DecodeOptionsFor(spec);
  for (int i = 0; i < warmup; ++i) FERRY_RETURN_IF_ERROR(Preprocess(spec, bytes, what).status());
  std::vector<double> decode, total;
  for (int i = 0; i < t.runs; ++i) {
    auto a = Clock::now();
    FERRY_ASSIGN_OR_RETURN(Image img, DecodeImage(bytes, o, what));
    decode.push_back(ms(a, Clock::now()));
  }
  for (int i = 0; i < t.runs; ++i) {
    auto a = Clock::now();
    FERRY_ASSIGN_OR_RETURN(Tensor out, Preprocess(spec, bytes, what));
    total.push_back(ms(a, Clock::now()));
    if (i == 0) t.shape = out.shape();
  }
  t.decode_p50_ms = pct(decode, 0.5);
  t.total_p50_ms = pct(total, 0.5);
  t.total_p90_ms = pct(total, 0.9);
  t.total_min_ms = *std::min_element(total.begin(), total.end());
  return t;
}

Tensor StackRows(const std::vector<Tensor>& ts) {
  Shape shape = ts[0].shape();
  shape[0] = 0;
  for (const Tensor& t : ts) shape[0] += t.dim(0);
  Tensor stacked(ts[0].dtype(), shape);
  if (ts[0].dtype() == DType::kString) {
    std::string* d = stacked.data<std::string>();
    for (const Tensor& t : ts)
      for (int64_t i = 0; i < t.size(); ++i) *d++ = t.data<std::string>()[i];
    return stacked;
  }
  char* d = static_cast<char*>(stacked.raw());
  for (const Tensor& t : ts) {
    std::memcpy(d, t.raw(), t.nbytes());
    d += t.nbytes();
  }
  return stacked;
}

Result<Tensor> PreprocessInput(const InputSpec& in, std::string_view bytes, const std::string& what,
                               ImageInfo* info) {
  if (in.is_table()) return PreprocessTable(in.table, bytes, what);
  if (in.is_text()) return PreprocessText(in.text, bytes, what);
  return Preprocess(in.image, bytes, what, info);
}

const InputSpec* FindInput(const Spec& spec, const std::string& name) {
  for (const auto& in : spec.inputs)
    if (in.name == name) return &in;
  return nullptr;
}

Result<Tensor> PreprocessFile(const InputSpec& in, const std::string& path, ImageInfo* info) {
  FERRY_ASSIGN_OR_RETURN(std::string bytes, ReadFileBytes(path));
  return PreprocessInput(in, bytes, path, info);
}

Result<std::vector<NamedTensor>> PreprocessFiles(const Spec& spec,
                                                 const std::vector<std::string>& paths) {
  if (paths.empty()) return InvalidError("no input files given");
  if (!spec.inputs.empty() && spec.inputs[0].is_text()) {
    // Text: every file's examples, in order, as one batch (padding spans the whole batch).
    std::vector<std::string> texts;
    for (const auto& path : paths) {
      FERRY_ASSIGN_OR_RETURN(std::string bytes, ReadFileBytes(path));
      FERRY_ASSIGN_OR_RETURN(std::vector<std::string> t,
                             ReadTexts(bytes, path, spec.inputs[0].text.field));
      texts.insert(texts.end(), std::make_move_iterator(t.begin()),
                   std::make_move_iterator(t.end()));
    }
    std::vector<NamedTensor> out;
    for (const auto& in : spec.inputs) {
      FERRY_ASSIGN_OR_RETURN(Tensor t,
                             EncodeTexts(in.text, texts, paths.size() == 1 ? paths[0] : "input"));
      out.push_back({in.name, std::move(t)});
    }
    return out;
  }
  // pad.grow: batch: the widest w / h among the files (decoded as that input decodes them), as
  // rapidocr's max_wh_ratio over its batch (w * 1.0 / h in double).
  std::vector<double> batch_ratio(spec.inputs.size(), 0.0);
  for (size_t i = 0; i < spec.inputs.size(); ++i) {
    const InputSpec& in = spec.inputs[i];
    if (in.is_table() || in.is_text() || !in.image.pad_grow_batch) continue;
    for (const auto& path : paths) {
      FERRY_ASSIGN_OR_RETURN(std::string bytes, ReadFileBytes(path));
      FERRY_ASSIGN_OR_RETURN(Image img, DecodeImage(bytes, DecodeOptionsFor(in.image), path));
      batch_ratio[i] = std::max(batch_ratio[i],
                                static_cast<double>(img.width) / static_cast<double>(img.height));
    }
  }
  std::vector<std::vector<Tensor>> per_input(spec.inputs.size());
  for (const auto& path : paths) {
    FERRY_ASSIGN_OR_RETURN(std::string bytes, ReadFileBytes(path));
    for (size_t i = 0; i < spec.inputs.size(); ++i) {
      const InputSpec& in = spec.inputs[i];
      Result<Tensor> t = in.image.pad_grow_batch && !in.is_table() && !in.is_text()
                             ? Preprocess(in.image, bytes, path, nullptr, batch_ratio[i])
                             : PreprocessInput(in, bytes, path);
      if (!t.ok()) return t.status();
      per_input[i].push_back(std::move(*t));
    }
  }
  std::vector<NamedTensor> out;
  for (size_t i = 0; i < spec.inputs.size(); ++i) {
    const InputSpec& in = spec.inputs[i];
    std::vector<Tensor>& ts = per_input[i];
    if (!in.is_table() && !in.image.batch && ts.size() > 1)
      return InvalidError("input '{}' has no batch axis (batch: false) but {} images were given",
                          in.name, ts.size());
    const Shape& first = ts[0].shape();
    for (size_t k = 1; k < ts.size(); ++k)
      if (Shape(ts[k].shape().begin() + 1, ts[k].shape().end()) !=
          Shape(first.begin() + 1, first.end()))
        return InvalidError(
            "input '{}': '{}' gives shape {} but '{}' gives {}; images stack into one batch only "
            "with equal shapes (resize to a fixed size, or crop)",
            in.name, paths[k], ShapeToString(ts[k].shape()), paths[0], ShapeToString(first));
    if (ts.size() == 1) {
      out.push_back({in.name, ts[0]});
      continue;
    }
    out.push_back({in.name, StackRows(ts)});
  }
  return out;
}

Status WriteTensors(const std::vector<NamedTensor>& tensors, const std::string& dir,
                    std::vector<std::string>* written) {
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) return InvalidError("cannot create output folder '{}': {}", dir, ec.message());
  for (const auto& nt : tensors) {
    std::string file = nt.name;
    for (char& ch : file)
      if (ch == '/' || ch == ':') ch = '_';
    std::string path = (std::filesystem::path(dir) / (file + ".npy")).string();
    FERRY_RETURN_IF_ERROR(WriteFileAtomic(path, SerializeNpy(nt.tensor)));
    if (written) written->push_back(path);
  }
  return Status::Ok();
}

}  // namespace ferry::prep
