// Images in memory (8-bit, interleaved HWC) and decoding of PNG (libpng) and JPEG (libjpeg-turbo).
// Every function here is reentrant: no globals, safe to call from many threads at once.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"

namespace ferry::prep {

// Row-major, interleaved: pixel (y, x) channel c at ((y * width) + x) * channels + c.
struct Image {
  int64_t height = 0, width = 0, channels = 0;  // channels: 1 (gray) or 3 (RGB)
  std::vector<uint8_t> pixels;

  Image() = default;
  Image(int64_t h, int64_t w, int64_t c)
      : height(h), width(w), channels(c), pixels(static_cast<size_t>(h * w * c)) {}
  uint8_t* row(int64_t y) { return pixels.data() + y * width * channels; }
  const uint8_t* row(int64_t y) const { return pixels.data() + y * width * channels; }
};

struct DecodeOptions {
  bool apply_exif = true;  // JPEG: rotate/flip by the EXIF Orientation tag (APP1)
  // A header claiming more pixels than this is refused before anything is allocated.
  int64_t max_pixels = 100'000'000;
  // PNG alpha (an alpha channel or tRNS transparency): dropped (false), or composited on the
  // opaque RGB `background` as Pillow's Image.alpha_composite(background, image) computes it:
  // out = a == 0 ? bg : (((t >> 8) + t) >> 8) >> 7 with t = 128 (src a + bg (255 - a)) + 2^14;
  // such an image decodes to RGB (a gray one is replicated first). Images without alpha and
  // JPEGs are unaffected.
  bool composite_alpha = false;
  uint8_t background[3] = {255, 255, 255};
};

// Decodes PNG or JPEG bytes to 8-bit gray (1 channel) or RGB (3 channels): palette images
// expand to RGB, alpha is dropped (or composited, see DecodeOptions), 16-bit samples keep their
// high byte, gray+alpha is gray.
// `what` names the source in messages. Errors (kInvalid): empty, truncated or corrupt data,
// a header over max_pixels; another format, named from its magic bytes, or a
// CMYK/YCCK JPEG, also kInvalid (exit 3, as every bad input). Never crashes on hostile input.
Result<Image> DecodeImage(std::string_view bytes, const DecodeOptions& options,
                          const std::string& what);

// The EXIF Orientation (1-8) of a JPEG APP1 payload ("Exif\0\0" + TIFF), 1 when absent or
// unreadable (Pillow and OpenCV ignore a malformed tag likewise).
int ExifOrientation(std::string_view app1);

// Applies an EXIF orientation (1-8) as Pillow's ImageOps.exif_transpose and OpenCV's imread do.
Image Orient(const Image& in, int orientation);

// Names the format of `bytes` from its magic bytes ("GIF", "WebP", ...; "unknown" otherwise).
std::string SniffFormat(std::string_view bytes);

}  // namespace ferry::prep
