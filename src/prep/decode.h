// Post-processing: a model's raw outputs to what a person reads — the top classes of a
// classifier, the boxes of a detector (YOLOv8-style output, non-maximum suppression, boxes mapped
// back through the input's letterbox), the string of a CTC text recogniser. Each reproduces the
// arithmetic of the code users compare with (torchvision.ops.nms, ultralytics'
// non_max_suppression and scale_boxes, greedy CTC), stated per function. Reentrant.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/status.h"
#include "core/tensor.h"
#include "prep/pipeline.h"
#include "prep/spec.h"

namespace ferry::prep {

// torchvision.ops.nms on the CPU: indices of the kept boxes, by score descending (ties: lower
// index first, a stable sort). Boxes are [n, 4] (x1, y1, x2, y2) float32; areas and IoU in
// float32 as its kernel computes them; box j is dropped when IoU(kept i, j) > iou_threshold.
std::vector<int64_t> Nms(const float* boxes, const float* scores, int64_t n, double iou_threshold);

struct Detection {
  float x1 = 0, y1 = 0, x2 = 0, y2 = 0;  // in the original image's pixels when mapped back
  float score = 0;
  int64_t cls = 0;
};

struct DetectOptions {
  float score_threshold = 0.25f;  // a candidate needs its best class score above this
  double iou_threshold = 0.45;
  int64_t max_detections = 300;
  int64_t max_candidates = 30000;  // ultralytics' max_nms: the best-scored candidates NMS sees
  bool class_agnostic = false;     // false: boxes offset by class * 7680 so classes never suppress
};

// ultralytics' non_max_suppression for one image of a YOLOv8-style output [1, 4 + C, N] (rows
// cx, cy, w, h, then C class scores, float32): candidates whose best score > threshold, boxes to
// corners (x -/+ w / 2 in float32), the best max_candidates by score, torchvision NMS on boxes
// offset by class, at most max_detections, in NMS order. kInvalid for another shape or dtype.
Result<std::vector<Detection>> DecodeYolo(const Tensor& output, const DetectOptions& options);

// ultralytics' scale_boxes: from the letterboxed model input (in_h x in_w) back to the original
// image (orig_h x orig_w): gain = min(in_h / orig_h, in_w / orig_w), padding round(... - 0.1) as
// the letterbox made it, subtract, divide by the gain, clip to the image.
void ScaleBoxes(std::vector<Detection>* boxes, int64_t in_h, int64_t in_w, int64_t orig_h,
                int64_t orig_w);

// Greedy CTC: per time step the best class (ties: the lower index), repeats collapsed, `blank`
// dropped, each remaining class k mapped to charset[k] (k outside the charset is kInvalid).
// Input [T, C] or [1, T, C] float32. Returns the string and the class ids.
struct CtcResult {
  std::string text;
  std::vector<int64_t> ids;
};
Result<CtcResult> CtcGreedy(const Tensor& probs, int64_t blank,
                            const std::vector<std::string>& charset);

// The spec's post-processing of the model output `name` (nullptr when it has none).
const OutputSpec* FindOutput(const Spec& spec, const std::string& name);

// The input whose images an output's boxes refer to: `o.input`, else the spec's first input.
const InputSpec* BoxInput(const Spec& spec, const OutputSpec& o);

// One model output through its OutputSpec. Detections: labels from the spec (else ""); with a
// letterboxed `input` (the spec's first input when unnamed) and its original image size known,
// boxes in the original image's pixels (`mapped`), else in the model input's.
struct DecodedOutput {
  std::string name;
  OutputSpec::Kind kind = OutputSpec::Kind::kDetect;
  std::vector<Detection> detections;
  std::vector<std::string> labels;  // per detection
  bool mapped = false;
  CtcResult ctc;
};
Result<DecodedOutput> DecodeOutput(const Spec& spec, const OutputSpec& o, const Tensor& value,
                                   const ImageInfo* original);

// "output0: 3 detections (boxes in the original image)\n  person 0.91 [x1, y1, x2, y2]\n..." /
// "out: 'hello' (ids 8 5 12 12 15)".
std::string FormatDecoded(const DecodedOutput& d);
// One JSON document: {"boxes_in": "original image"|"model input", "detections": [{"box": [x1,
// y1, x2, y2], "score", "class", "label"}]} or {"text", "ids"} (ferry serve's `<output>_decoded`).
std::string DecodedJson(const DecodedOutput& d);

}  // namespace ferry::prep
