// The image pipeline: encoded bytes -> decode -> colour -> resize -> center crop -> dtype,
// scale, mean/std -> layout (+ batch axis) -> a ferry::Tensor.
// Reentrant: no globals; a Spec may be shared read-only by many threads running Preprocess.
#pragma once

#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "core/status.h"
#include "core/tensor.h"
#include "prep/image.h"
#include "prep/spec.h"

namespace ferry::prep {

// One image through one input's steps. With spec.batch the tensor has a leading axis of 1.
// `what` names the source in messages. kInvalid for undecodable bytes or a crop larger than
// the (resized) image.
struct ImageInfo {
  int64_t height = 0, width = 0;  // the decoded image (after EXIF orientation), before resizing
};
// batch_wh_ratio (pad.grow: batch): the widest w / h of the image's batch, which its box
// grows to (0: the image's own, as pad.grow: true); PreprocessFiles passes it.
Result<Tensor> Preprocess(const ImageSpec& spec, std::string_view bytes, const std::string& what,
                          ImageInfo* info = nullptr, double batch_wh_ratio = 0);

// The steps after decoding (exposed for tests): colour, resize, crop, to the output tensor.
Result<Tensor> PreprocessImage(const ImageSpec& spec, const Image& decoded, const std::string& what,
                               double batch_wh_ratio = 0);

// Gray from RGB as the library computes it (ITU-R 601-2 luma in fixed point): Pillow's
// convert("L") (19595, 38470, 7471 >> 16) or OpenCV 5's cvtColor(RGB2GRAY) (9798, 19235, 3735
// >> 15; measured equal on 200,000 random colours).
Image ToGray(const Image& rgb, Library library);

struct NamedTensor {
  std::string name;
  Tensor tensor;
};

// One input's steps on one file: an image (Preprocess) or a CSV document (PreprocessTable).
Result<Tensor> PreprocessInput(const InputSpec& in, std::string_view bytes, const std::string& what,
                               ImageInfo* info = nullptr);

// The spec's input of that name (nullptr when the spec has none).
const InputSpec* FindInput(const Spec& spec, const std::string& name);
// A file (an image, or a CSV for a table input) read and run through one input's steps.
Result<Tensor> PreprocessFile(const InputSpec& in, const std::string& path,
                              ImageInfo* info = nullptr);

// Tensors of equal shape but the first axis, concatenated on it (strings too).
Tensor StackRows(const std::vector<Tensor>& tensors);

// Every file through every input of the spec, stacked on the batch axis: one tensor per input
// (tables: each file's rows, concatenated). The files are one batch (pad.grow: batch: every
// box as wide as the widest line among them needs).
// kInvalid when a file fails, or when the images' tensors differ in shape (use a fixed size or
// a crop), or when an input without a batch axis gets more than one file.
Result<std::vector<NamedTensor>> PreprocessFiles(const Spec& spec,
                                                 const std::vector<std::string>& paths);

// In-process timing of one image through one input's steps (`ferry prep bench`): `runs` timed
// repetitions after `warmup` untimed ones, decoding alone and the whole pipeline, each on one
// thread. kInvalid when the image fails.
struct PrepTiming {
  int runs = 0;
  Shape shape;  // the output tensor's
  double decode_p50_ms = 0, total_p50_ms = 0, total_p90_ms = 0, total_min_ms = 0;
};
Result<PrepTiming> TimePreprocess(const ImageSpec& spec, std::string_view bytes,
                                  const std::string& what, int runs, int warmup);

// Writes `<dir>/<name>.npy` per tensor (temp file + rename each; the folder is created).
// A name with '/' or ':' is written with those characters as '_'.
Status WriteTensors(const std::vector<NamedTensor>& tensors, const std::string& dir,
                    std::vector<std::string>* written);

}  // namespace ferry::prep
