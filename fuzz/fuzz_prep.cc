// Pre-processing of untrusted bytes: what `ferry serve` does with an encoded image a client
// sends to a model with a prep spec (prep::Preprocess: PNG/JPEG decoding, EXIF, colour, resize,
// crop, normalisation, layout), and the spec parser (prep::ParseSpec).
//   byte 0 odd:  the rest is a spec (YAML or JSON). Accepted: SpecToJson must parse again to the
//                same JSON. Refused: kInvalid, the message starting with the file name.
//   byte 0 even: the rest is an encoded image, run through one of kSpecs fixed specs chosen by
//                byte 0 >> 1 (every filter, colour, EXIF mode, resize kind, layout, dtype).
//                Accepted: a tensor of the spec's dims (where the spec fixes them) with finite
//                values. Refused: kInvalid naming the source.
// Headers over 2^20 pixels are refused before allocating (decode.max_pixels).
#include <cmath>
#include <string>

#include "core/status.h"
#include "fuzz_common.h"
#include "prep/pipeline.h"
#include "prep/spec.h"

namespace {

using namespace ferry;

constexpr int kSpecs = 128;

prep::ImageSpec SpecFor(int index) {
  prep::ImageSpec s;
  s.max_pixels = 1 << 20;
  const int filter = index % prep::kNumFilters;
  const int rest = index / prep::kNumFilters;  // 0..9
  s.exif = rest % 2 ? prep::ExifMode::kIgnore : prep::ExifMode::kApply;
  s.color = rest % 3 == 0   ? prep::Color::kRgb
            : rest % 3 == 1 ? prep::Color::kGray
                            : prep::Color::kBgr;
  s.layout = rest % 4 < 2 ? prep::Layout::kChw : prep::Layout::kHwc;
  prep::ResizeSpec r;
  r.filter = static_cast<prep::Filter>(filter);
  s.library = prep::FilterLibrary(r.filter);
  switch (rest % 5) {
    case 0:  // down or up to a fixed size
      r.height = 7;
      r.width = 5;
      s.resize = r;
      break;
    case 1:  // shorter side (every other one capped by longer_side), then a center crop
      r.shorter_side = 6;
      if (index % 2) r.longer_side = 7;
      s.resize = r;
      s.crop_height = 4;
      s.crop_width = 4;
      break;
    case 2:  // enlarge; every other one letterboxed (scaled to fit, padded)
      r.height = 33;
      r.width = 40;
      r.letterbox = index % 2 == 0;
      r.pad_value = 114;
      s.resize = r;
      break;
    case 3:  // no resize: the image's own size, a crop that may not fit
      s.crop_height = 3;
      s.crop_width = 2;
      break;
    default:  // no resize, no crop
      break;
  }
  if (rest % 6 == 5) {
    s.dtype = DType::kUint8;
  } else {
    s.scale = 1.0 / 255;
    s.mean = {0.485, 0.456, 0.406};
    s.std = {0.229, 0.224, 0.225};
    if (s.color == prep::Color::kGray) {
      s.mean = {0.5};
      s.std = {0.25};
    }
  }
  s.batch = rest % 7 != 3;
  // Alpha composited on a colour for every third spec (PNGs with alpha or tRNS).
  if (index % 3 == 1) {
    s.composite_alpha = true;
    s.background[0] = 10, s.background[1] = 200, s.background[2] = 30;
  }
  return s;
}

void CheckImage(int index, std::string_view bytes) {
  const prep::ImageSpec spec = SpecFor(index);
  auto t = prep::Preprocess(spec, bytes, "fuzz image");
  if (!t.ok()) {
    if (t.status().code() != StatusCode::kInvalid)
      fuzz::Fail("an image refused with another code than kInvalid: " + t.status().message());
    if (t.status().message().find("fuzz image") == std::string::npos)
      fuzz::Fail("an image error that does not name the source: " + t.status().message());
    return;
  }
  const std::vector<int64_t> want = prep::OutputShape(spec);
  const Shape& got = t->shape();
  if (got.size() != want.size()) fuzz::Fail("the tensor's rank differs from the spec's");
  for (size_t d = 0; d < want.size(); ++d)
    if (want[d] >= 0 && got[d] != want[d]) fuzz::Fail("a tensor dim differs from the spec's");
  if (t->dtype() == DType::kFloat) {
    const float* p = t->data<float>();
    for (int64_t i = 0; i < t->size(); ++i)
      if (!std::isfinite(p[i])) fuzz::Fail("a pre-processed value is not finite");
  }
}

void CheckSpec(const std::string& text) {
  auto s = prep::ParseSpec(text, "fuzz/prep.yaml");
  if (!s.ok()) {
    if (s.status().message().rfind("fuzz/prep.yaml", 0) != 0)
      fuzz::Fail("a spec error that does not start with the file: " + s.status().message());
    return;
  }
  const std::string json = prep::SpecToJson(*s);
  auto again = prep::ParseSpec(json, "fuzz/prep.json");
  if (!again.ok())
    fuzz::Fail("an accepted spec's JSON is refused: " + again.status().message() + "\n" + json);
  if (prep::SpecToJson(*again) != json) fuzz::Fail("a spec's JSON changed between two parses");
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const std::string_view rest(reinterpret_cast<const char*>(data) + 1, size - 1);
  if (data[0] & 1)
    CheckSpec(std::string(rest));
  else
    CheckImage((data[0] >> 1) % kSpecs, rest);
  return 0;
}
