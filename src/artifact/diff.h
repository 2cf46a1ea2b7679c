// `ferry artifact diff OLD NEW` as a library call: what changed between two artifacts, and
// whether a deployment that serves OLD can load NEW in its place (the compatibility verdict).
//
// Breaking (a client of OLD may fail or get other answers from NEW):
//   - another model name;
//   - the served interface (the default variant's inputs and outputs, and the interface of every
//     variant both hold): an input removed, renamed or added, an output removed or renamed, a
//     dtype changed, a rank changed, a fixed dim changed, an input dim that was dynamic now fixed
//     (narrower), an output dim that was fixed now dynamic or another size;
//   - a variant removed (a deployment may serve it by name);
//   - the pre-processing spec removed, or any of its steps changed (another filter, size, crop,
//     colour, mean, std, layout, dtype: the same raw input gives another tensor);
//   - class names removed or changed (the classification extension's labels).
// Compatible (listed, no action needed): a new version, another source or weights digest (a
// re-quantized or re-optimized model with the same interface), other steps, opsets, tolerances,
// verification numbers, golden set, Ferry version; an output added; an input dim that was fixed
// now dynamic (wider); a pre-processing spec or class names added; a variant added; another
// default variant or fallback.
#pragma once

#include <string>
#include <vector>

#include "artifact/inspect.h"

namespace ferry::artifact {

struct ArtifactChange {
  bool breaking = false;
  std::string what;       // "output 'logits'", "prep inputs[image].image.resize.filter"
  std::string old_value;  // "" : absent in OLD
  std::string new_value;  // "" : absent in NEW
  std::string why;        // what it means for a client (breaking changes), or a note
};

struct ArtifactDiff {
  std::string old_path, new_path;
  std::string old_name, old_version, new_name, new_version;
  std::vector<ArtifactChange> changes;  // breaking first, then compatible, each in field order
  bool identical = false;               // the manifests are byte-identical
  int breaking() const;
};

ArtifactDiff DiffArtifacts(const ArtifactInfo& old_artifact, const ArtifactInfo& new_artifact);

// Text: the verdict line first ("compatible" / "BREAKING: N change(s)"), then every change.
std::string FormatText(const ArtifactDiff& d);
std::string FormatJson(const ArtifactDiff& d);

}  // namespace ferry::artifact
