// PNG (libpng) and JPEG (libjpeg-turbo) decoding, EXIF Orientation, orientation transforms.
//
// Both libraries report errors by longjmp. Each decoder keeps everything with a destructor in a
// state struct owned by its caller's frame, so a longjmp back to the setjmp point skips no
// destructor; the setjmp frame itself holds only plain pointers and integers.
#include "prep/image.h"

#include <png.h>
#include <setjmp.h>

#include <cstdio>
#include <cstring>

// jpeglib.h needs size_t and FILE declared first.
#include <jerror.h>
#include <jpeglib.h>

namespace ferry::prep {

namespace {

bool StartsWith(std::string_view s, std::string_view prefix) {
  return s.size() >= prefix.size() && s.substr(0, prefix.size()) == prefix;
}

Status TooLarge(const std::string& what, const char* format, uint64_t w, uint64_t h,
                int64_t max_pixels) {
  return InvalidError(
      "{}: {} header claims {}x{} pixels, over the limit of {} (decode.max_pixels); refused "
      "before allocating",
      what, format, w, h, max_pixels);
}

// ---- JPEG ----

struct JpegError {
  jpeg_error_mgr pub;
  jmp_buf jump;
  char message[JMSG_LENGTH_MAX + 64];
};

struct JpegState {
  jpeg_decompress_struct cinfo;
  JpegError err;
  Image image;
  std::string exif;  // the APP1 payload starting "Exif\0\0", if any
  int64_t max_pixels = 0;
  bool too_large = false;
  bool unsupported = false;
};

[[noreturn]] void JpegErrorExit(j_common_ptr c) {
  auto* e = reinterpret_cast<JpegError*>(c->err);
  char buf[JMSG_LENGTH_MAX];
  c->err->format_message(c, buf);
  std::snprintf(e->message, sizeof e->message, "%s", buf);
  longjmp(e->jump, 1);
}

// Warnings are ignored as Pillow and OpenCV ignore them, except the data ending early: the
// library would fill the rest with gray, Pillow refuses ("image file is truncated").
void JpegEmitMessage(j_common_ptr c, int level) {
  if (level >= 0) return;
  if (c->err->msg_code == JWRN_JPEG_EOF) {
    auto* e = reinterpret_cast<JpegError*>(c->err);
    std::snprintf(e->message, sizeof e->message, "truncated (the data ends inside the image)");
    longjmp(e->jump, 1);
  }
}

bool RunJpeg(JpegState* st, std::string_view bytes) {
  jpeg_decompress_struct* cinfo = &st->cinfo;
  cinfo->err = jpeg_std_error(&st->err.pub);
  st->err.pub.error_exit = JpegErrorExit;
  st->err.pub.emit_message = JpegEmitMessage;
  st->err.message[0] = '\0';
  if (setjmp(st->err.jump)) {
    jpeg_destroy_decompress(cinfo);
    return false;
  }
  jpeg_create_decompress(cinfo);
  jpeg_mem_src(cinfo, reinterpret_cast<const unsigned char*>(bytes.data()),
               static_cast<unsigned long>(bytes.size()));
  jpeg_save_markers(cinfo, JPEG_APP0 + 1, 0xFFFF);
  jpeg_read_header(cinfo, TRUE);
  if (cinfo->jpeg_color_space == JCS_CMYK || cinfo->jpeg_color_space == JCS_YCCK) {
    st->unsupported = true;
    std::snprintf(st->err.message, sizeof st->err.message, "%s",
                  cinfo->jpeg_color_space == JCS_CMYK ? "CMYK" : "YCCK");
    jpeg_destroy_decompress(cinfo);
    return false;
  }
  uint64_t pixels = uint64_t{cinfo->image_width} * cinfo->image_height;
  if (pixels > static_cast<uint64_t>(st->max_pixels)) {
    st->too_large = true;
    jpeg_destroy_decompress(cinfo);
    return false;
  }
  const bool gray = cinfo->jpeg_color_space == JCS_GRAYSCALE || cinfo->num_components == 1;
  cinfo->out_color_space = gray ? JCS_GRAYSCALE : JCS_RGB;
  jpeg_start_decompress(cinfo);
  st->image = Image(cinfo->output_height, cinfo->output_width, cinfo->output_components);
  while (cinfo->output_scanline < cinfo->output_height) {
    JSAMPROW row = st->image.row(cinfo->output_scanline);
    jpeg_read_scanlines(cinfo, &row, 1);
  }
  for (jpeg_saved_marker_ptr m = cinfo->marker_list; m; m = m->next) {
    if (m->marker == JPEG_APP0 + 1 && m->data_length >= 6 &&
        std::memcmp(m->data, "Exif\0\0", 6) == 0) {
      st->exif.assign(reinterpret_cast<const char*>(m->data), m->data_length);
      break;
    }
  }
  jpeg_finish_decompress(cinfo);
  jpeg_destroy_decompress(cinfo);
  return true;
}

Result<Image> DecodeJpeg(std::string_view bytes, const DecodeOptions& o, const std::string& what) {
  auto st = std::make_unique<JpegState>();
  st->max_pixels = o.max_pixels;
  if (!RunJpeg(st.get(), bytes)) {
    if (st->too_large)
      return TooLarge(what, "JPEG", st->cinfo.image_width, st->cinfo.image_height, o.max_pixels);
    if (st->unsupported)
      return InvalidError("{}: JPEG colour space {} is not supported (only gray and YCbCr/RGB)",
                          what, st->err.message);
    return InvalidError("{}: corrupt JPEG: {}", what, st->err.message);
  }
  if (o.apply_exif && !st->exif.empty()) {
    int orientation = ExifOrientation(st->exif);
    if (orientation != 1) return Orient(st->image, orientation);
  }
  return std::move(st->image);
}

// ---- PNG ----

struct PngState {
  png_structp png = nullptr;
  png_infop info = nullptr;
  std::string_view data;
  size_t pos = 0;
  char message[256] = {0};
  Image image;
  std::vector<png_bytep> rows;
  int64_t max_pixels = 0;
  png_uint_32 width = 0, height = 0;
  bool too_large = false;
  bool bad_channels = false;
  bool composite = false;  // in: composite alpha on `background`
  uint8_t background[3] = {255, 255, 255};
};

// Pillow's Image.alpha_composite (libImaging/AlphaComposite.c, PRECISION_BITS 7) of one RGBA
// pixel over an opaque background colour; the result is opaque.
uint8_t AlphaOver(uint32_t src, uint32_t alpha, uint32_t bg) {
  if (alpha == 0) return static_cast<uint8_t>(bg);
  const uint32_t blend = 255 * (255 - alpha);
  const uint32_t outa255 = alpha * 255 + blend;
  const uint32_t coef1 = alpha * 255 * 255 * (1u << 7) / outa255;
  const uint32_t coef2 = 255 * (1u << 7) - coef1;
  const uint32_t t = src * coef1 + bg * coef2 + (0x80u << 7);
  return static_cast<uint8_t>((((t >> 8) + t) >> 8) >> 7);
}

[[noreturn]] void PngError(png_structp png, png_const_charp msg) {
  auto* st = static_cast<PngState*>(png_get_error_ptr(png));
  std::snprintf(st->message, sizeof st->message, "%s", msg);
  png_longjmp(png, 1);
}
void PngWarning(png_structp, png_const_charp) {}

void PngRead(png_structp png, png_bytep out, size_t n) {
  auto* st = static_cast<PngState*>(png_get_io_ptr(png));
  if (n > st->data.size() - st->pos) png_error(png, "truncated (the data ends inside the image)");
  std::memcpy(out, st->data.data() + st->pos, n);
  st->pos += n;
}

bool RunPng(PngState* st) {
  st->png = png_create_read_struct(PNG_LIBPNG_VER_STRING, st, PngError, PngWarning);
  if (!st->png) {
    std::snprintf(st->message, sizeof st->message, "out of memory");
    return false;
  }
  st->info = png_create_info_struct(st->png);
  if (!st->info) {
    png_destroy_read_struct(&st->png, nullptr, nullptr);
    std::snprintf(st->message, sizeof st->message, "out of memory");
    return false;
  }
  if (setjmp(png_jmpbuf(st->png))) {
    png_destroy_read_struct(&st->png, &st->info, nullptr);
    return false;
  }
  png_set_read_fn(st->png, st, PngRead);
  png_read_info(st->png, st->info);
  st->width = png_get_image_width(st->png, st->info);
  st->height = png_get_image_height(st->png, st->info);
  if (uint64_t{st->width} * st->height > static_cast<uint64_t>(st->max_pixels)) {
    st->too_large = true;
    png_destroy_read_struct(&st->png, &st->info, nullptr);
    return false;
  }
  int color_type = png_get_color_type(st->png, st->info);
  int bit_depth = png_get_bit_depth(st->png, st->info);
  if (color_type == PNG_COLOR_TYPE_PALETTE) png_set_palette_to_rgb(st->png);
  if (color_type == PNG_COLOR_TYPE_GRAY && bit_depth < 8) png_set_expand_gray_1_2_4_to_8(st->png);
  if (bit_depth == 16) png_set_strip_16(st->png);
  const bool has_trns = png_get_valid(st->png, st->info, PNG_INFO_tRNS) != 0;
  const bool composite = st->composite && ((color_type & PNG_COLOR_MASK_ALPHA) != 0 || has_trns);
  if (composite) {
    if (has_trns) png_set_tRNS_to_alpha(st->png);
    if ((color_type & PNG_COLOR_MASK_COLOR) == 0) png_set_gray_to_rgb(st->png);
  } else {
    png_set_strip_alpha(st->png);
  }
  png_set_interlace_handling(st->png);
  png_read_update_info(st->png, st->info);
  int channels = png_get_channels(st->png, st->info);
  if ((composite ? channels != 4 : (channels != 1 && channels != 3)) ||
      png_get_bit_depth(st->png, st->info) != 8) {
    st->bad_channels = true;
    png_destroy_read_struct(&st->png, &st->info, nullptr);
    return false;
  }
  // With compositing the RGBA rows land in a temporary and are blended into RGB.
  std::vector<uint8_t> rgba;
  st->image = Image(st->height, st->width, composite ? 3 : channels);
  if (composite) rgba.resize(static_cast<size_t>(st->height) * st->width * 4);
  st->rows.resize(st->height);
  for (png_uint_32 y = 0; y < st->height; ++y)
    st->rows[y] =
        composite ? rgba.data() + static_cast<size_t>(y) * st->width * 4 : st->image.row(y);
  png_read_image(st->png, st->rows.data());
  png_read_end(st->png, nullptr);
  png_destroy_read_struct(&st->png, &st->info, nullptr);
  if (composite) {
    const size_t n = static_cast<size_t>(st->height) * st->width;
    uint8_t* d = st->image.pixels.data();
    for (size_t i = 0; i < n; ++i)
      for (int k = 0; k < 3; ++k)
        d[i * 3 + k] = AlphaOver(rgba[i * 4 + k], rgba[i * 4 + 3], st->background[k]);
  }
  return true;
}

Result<Image> DecodePng(std::string_view bytes, const DecodeOptions& o, const std::string& what) {
  auto st = std::make_unique<PngState>();
  st->data = bytes;
  st->max_pixels = o.max_pixels;
  st->composite = o.composite_alpha;
  std::memcpy(st->background, o.background, 3);
  if (!RunPng(st.get())) {
    if (st->too_large) return TooLarge(what, "PNG", st->width, st->height, o.max_pixels);
    if (st->bad_channels) return InvalidError("{}: PNG pixel layout not supported", what);
    return InvalidError("{}: corrupt PNG: {}", what, st->message);
  }
  return std::move(st->image);
}

uint32_t Read16(const unsigned char* p, bool le) {
  return le ? (p[0] | (p[1] << 8)) : ((p[0] << 8) | p[1]);
}
uint32_t Read32(const unsigned char* p, bool le) {
  return le ? (uint32_t{p[0]} | (uint32_t{p[1]} << 8) | (uint32_t{p[2]} << 16) |
               (uint32_t{p[3]} << 24))
            : ((uint32_t{p[0]} << 24) | (uint32_t{p[1]} << 16) | (uint32_t{p[2]} << 8) |
               uint32_t{p[3]});
}

}  // namespace

int ExifOrientation(std::string_view app1) {
  // "Exif\0\0", then a TIFF header: byte order, 42, offset of IFD0; IFD0: count, 12-byte entries.
  if (app1.size() < 6 + 8 || std::memcmp(app1.data(), "Exif\0\0", 6) != 0) return 1;
  const auto* tiff = reinterpret_cast<const unsigned char*>(app1.data()) + 6;
  const size_t n = app1.size() - 6;
  bool le;
  if (tiff[0] == 'I' && tiff[1] == 'I')
    le = true;
  else if (tiff[0] == 'M' && tiff[1] == 'M')
    le = false;
  else
    return 1;
  if (Read16(tiff + 2, le) != 42) return 1;
  uint64_t ifd = Read32(tiff + 4, le);
  if (ifd + 2 > n) return 1;
  uint32_t count = Read16(tiff + ifd, le);
  for (uint32_t i = 0; i < count; ++i) {
    uint64_t e = ifd + 2 + uint64_t{i} * 12;
    if (e + 12 > n) return 1;
    if (Read16(tiff + e, le) != 0x0112) continue;  // Orientation
    uint32_t type = Read16(tiff + e + 2, le);
    uint32_t value = type == 3   ? Read16(tiff + e + 8, le)  // SHORT
                     : type == 4 ? Read32(tiff + e + 8, le)  // LONG
                                 : 0;
    return value >= 1 && value <= 8 ? static_cast<int>(value) : 1;
  }
  return 1;
}

Image Orient(const Image& in, int orientation) {
  if (orientation < 2 || orientation > 8) return in;
  const int64_t h = in.height, w = in.width, c = in.channels;
  const bool swap = orientation >= 5;
  Image out(swap ? w : h, swap ? h : w, c);
  for (int64_t y = 0; y < out.height; ++y) {
    uint8_t* dst = out.row(y);
    for (int64_t x = 0; x < out.width; ++x) {
      int64_t sy = 0, sx = 0;
      switch (orientation) {
        case 2:
          sy = y, sx = w - 1 - x;
          break;  // mirror left-right
        case 3:
          sy = h - 1 - y, sx = w - 1 - x;
          break;  // rotate 180
        case 4:
          sy = h - 1 - y, sx = x;
          break;  // mirror top-bottom
        case 5:
          sy = x, sx = y;
          break;  // transpose
        case 6:
          sy = h - 1 - x, sx = y;
          break;  // rotate 90 clockwise
        case 7:
          sy = h - 1 - x, sx = w - 1 - y;
          break;  // transverse
        case 8:
          sy = x, sx = w - 1 - y;
          break;  // rotate 90 counter-clockwise
      }
      std::memcpy(dst + x * c, in.row(sy) + sx * c, static_cast<size_t>(c));
    }
  }
  return out;
}

std::string SniffFormat(std::string_view b) {
  if (StartsWith(b, "\x89PNG\r\n\x1a\n")) return "PNG";
  if (StartsWith(b, "\xff\xd8\xff")) return "JPEG";
  if (StartsWith(b, "GIF87a") || StartsWith(b, "GIF89a")) return "GIF";
  if (StartsWith(b, "BM")) return "BMP";
  if (b.size() >= 12 && StartsWith(b, "RIFF") && b.substr(8, 4) == "WEBP") return "WebP";
  if (StartsWith(b, std::string_view("II*\0", 4)) || StartsWith(b, std::string_view("MM\0*", 4)))
    return "TIFF";
  if (StartsWith(b, std::string_view("\0\0\0\x0cjP  ", 8)) ||
      StartsWith(b, std::string_view("\xff\x4f\xff\x51", 4)))
    return "JPEG 2000";
  if (b.size() >= 12 && b.substr(4, 4) == "ftyp") {
    std::string_view brand = b.substr(8, 4);
    if (brand == "avif" || brand == "avis") return "AVIF";
    if (brand == "heic" || brand == "heix" || brand == "mif1" || brand == "msf1") return "HEIF";
  }
  if (b.size() >= 2 && b[0] == 'P' && b[1] >= '1' && b[1] <= '7') return "PNM";
  if (StartsWith(b, "qoif")) return "QOI";
  if (StartsWith(b, "\x76\x2f\x31\x01")) return "OpenEXR";
  if (StartsWith(b, "8BPS")) return "PSD";
  return "unknown";
}

Result<Image> DecodeImage(std::string_view bytes, const DecodeOptions& options,
                          const std::string& what) {
  if (bytes.empty()) return InvalidError("{}: empty file (expected a PNG or JPEG image)", what);
  std::string format = SniffFormat(bytes);
  if (format == "PNG") return DecodePng(bytes, options, what);
  if (format == "JPEG") return DecodeJpeg(bytes, options, what);
  if (format == "unknown") {
    std::string head;
    for (size_t i = 0; i < std::min<size_t>(bytes.size(), 8); ++i)
      head += fmt::format("{}{:02x}", i ? " " : "", static_cast<unsigned char>(bytes[i]));
    return InvalidError("{}: not a PNG or JPEG image (unknown format, first bytes {})", what, head);
  }
  return InvalidError("{}: {} images are not supported (PNG and JPEG are)", what, format);
}

}  // namespace ferry::prep
