// The spec parser: YAML (or JSON) to prep::Spec, every key validated with its line.
#include "prep/spec.h"

#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <map>

#include <nlohmann/json.hpp>

#include "core/npy.h"
#include "core/yaml_keys.h"
#include "prep/tokenizer.h"

namespace ferry::prep {

namespace {

struct FilterRow {
  Filter id;
  const char* name;
  Library library;
};
constexpr FilterRow kFilters[] = {
#define FERRY_PREP_FILTER(id, name, library) {Filter::id, name, Library::library},
#include "prep/filters.inc"
#undef FERRY_PREP_FILTER
};
static_assert(sizeof(kFilters) / sizeof(kFilters[0]) == kNumFilters);

using yaml_keys::Describe;
using yaml_keys::Join;
using yaml_keys::LineOf;

struct Entry {
  YAML::Node node;
  int line = 0;
};
using Map = std::map<std::string, Entry>;

class Parser {
 public:
  explicit Parser(std::string file) : file_(std::move(file)) {}

  Status Error(int line, const std::string& key, const std::string& what) const {
    if (key.empty()) return InvalidError("{}:{}: {}", file_, line, what);
    return InvalidError("{}:{}: {}: {}", file_, line, key, what);
  }
  Status Expected(const Entry& e, const std::string& key, const std::string& what) const {
    return Error(e.line, key, fmt::format("expected {}, got {}", what, Describe(e.node)));
  }
  // `e` as a mapping whose keys are all in `allowed` (unknown keys and duplicates refused).
  Result<Map> Open(const Entry& e, const std::string& path,
                   const std::vector<std::string>& allowed) const {
    Map out;
    if (!e.node.IsMap()) return Expected(e, path.empty() ? "spec" : path, "a mapping");
    for (auto it = e.node.begin(); it != e.node.end(); ++it) {
      int line = LineOf(it->first, e.line);
      if (!it->first.IsScalar()) return Error(line, path, "keys must be plain names");
      std::string key = it->first.Scalar();
      std::string full = Join(path, key);
      if (std::find(allowed.begin(), allowed.end(), key) == allowed.end()) {
        std::string list;
        for (const auto& a : allowed) list += (list.empty() ? "" : ", ") + a;
        return Error(line, full, fmt::format("unknown key (expected one of: {})", list));
      }
      if (out.count(key)) return Error(line, full, "given twice");
      out[key] = Entry{it->second, LineOf(it->second, line)};
    }
    return out;
  }

  Result<Entry> Required(const Map& m, const std::string& key, const std::string& path,
                         int line) const {
    auto it = m.find(key);
    if (it == m.end()) return Error(line, Join(path, key), "missing (required)");
    return it->second;
  }
  static const Entry* Optional(const Map& m, const std::string& key) {
    auto it = m.find(key);
    return it == m.end() ? nullptr : &it->second;
  }

  Result<std::string> String(const Entry& e, const std::string& key) const {
    if (!e.node.IsScalar() || e.node.Scalar().empty()) return Expected(e, key, "a string");
    return e.node.Scalar();
  }
  // One of `choices` (listed in the error).
  Result<std::string> Choice(const Entry& e, const std::string& key,
                             const std::vector<std::string>& choices) const {
    std::string list;
    for (const auto& c : choices) list += (list.empty() ? "" : "|") + c;
    if (!e.node.IsScalar()) return Expected(e, key, list);
    const std::string& s = e.node.Scalar();
    if (std::find(choices.begin(), choices.end(), s) == choices.end())
      return Expected(e, key, list);
    return s;
  }
  Result<double> Number(const Entry& e, const std::string& key) const {
    if (!e.node.IsScalar()) return Expected(e, key, "a number");
    const std::string& s = e.node.Scalar();
    char* end = nullptr;
    double v = std::strtod(s.c_str(), &end);
    if (s.empty() || *end != '\0' || !std::isfinite(v)) return Expected(e, key, "a number");
    return v;
  }
  Result<int64_t> Int(const Entry& e, const std::string& key, int64_t min, int64_t max) const {
    std::string what = fmt::format("an integer in [{}, {}]", min, max);
    if (!e.node.IsScalar()) return Expected(e, key, what);
    const std::string& s = e.node.Scalar();
    char* end = nullptr;
    errno = 0;
    long long v = std::strtoll(s.c_str(), &end, 10);
    if (s.empty() || *end != '\0' || errno != 0 || v < min || v > max)
      return Expected(e, key, what);
    return static_cast<int64_t>(v);
  }
  Result<bool> Bool(const Entry& e, const std::string& key) const {
    if (e.node.IsScalar()) {
      const std::string& s = e.node.Scalar();
      if (s == "true") return true;
      if (s == "false") return false;
    }
    return Expected(e, key, "true|false");
  }
  // A list of `n` (or, when n == 0, 1 to 4) numbers.
  Result<std::vector<double>> Numbers(const Entry& e, const std::string& key, size_t n) const {
    std::string what = n ? fmt::format("a list of {} numbers", n) : "a list of 1 to 4 numbers";
    if (!e.node.IsSequence()) return Expected(e, key, what);
    size_t count = e.node.size();
    if (n ? count != n : (count < 1 || count > 4))
      return Error(e.line, key, fmt::format("expected {}, got {} items", what, count));
    std::vector<double> out;
    for (size_t i = 0; i < count; ++i) {
      Entry item{e.node[i], LineOf(e.node[i], e.line)};
      FERRY_ASSIGN_OR_RETURN(double v, Number(item, fmt::format("{}[{}]", key, i)));
      out.push_back(v);
    }
    return out;
  }
  // [H, W], each in [1, 65536].
  Result<std::pair<int64_t, int64_t>> Size(const Entry& e, const std::string& key) const {
    if (!e.node.IsSequence() || e.node.size() != 2)
      return Expected(e, key, "[H, W] (two integers)");
    int64_t hw[2];
    for (size_t i = 0; i < 2; ++i) {
      Entry item{e.node[i], LineOf(e.node[i], e.line)};
      FERRY_ASSIGN_OR_RETURN(hw[i], Int(item, fmt::format("{}[{}]", key, i), 1, 65536));
    }
    return std::make_pair(hw[0], hw[1]);
  }

  Result<Spec> Top(const YAML::Node& root) {
    Spec spec;
    spec.path = file_;
    if (root.IsNull()) return Error(1, "", "empty spec (expected a mapping with `inputs`)");
    FERRY_ASSIGN_OR_RETURN(Map top, Open(Entry{root, 1}, "", {"version", "inputs", "outputs"}));
    if (auto* v = Optional(top, "version")) {
      FERRY_ASSIGN_OR_RETURN(int64_t version, Int(*v, "version", 1, 1));
      (void)version;
    }
    FERRY_ASSIGN_OR_RETURN(Entry inputs, Required(top, "inputs", "", 1));
    if (!inputs.node.IsSequence() || inputs.node.size() == 0)
      return Expected(inputs, "inputs", "a non-empty list");
    for (size_t i = 0; i < inputs.node.size(); ++i) {
      std::string path = fmt::format("inputs[{}]", i);
      Entry item{inputs.node[i], LineOf(inputs.node[i], inputs.line)};
      FERRY_ASSIGN_OR_RETURN(InputSpec in, Input(item, path));
      for (const auto& other : spec.inputs)
        if (other.name == in.name)
          return Error(item.line, path + ".name", fmt::format("'{}' given twice", in.name));
      if (!spec.inputs.empty() &&
          (spec.inputs[0].is_table() != in.is_table() || spec.inputs[0].is_text() != in.is_text()))
        return Error(item.line, path,
                     "a spec's inputs are all images or all tables or all text (the same "
                     "files feed every input)");
      if (in.is_text() && !in.text.from.empty()) {  // a companion takes its source's settings
        const InputSpec* src = nullptr;
        for (const auto& other : spec.inputs)
          if (other.name == in.text.from) src = &other;
        if (src == nullptr || !src->text.from.empty())
          return Error(
              item.line, path + ".text.from",
              fmt::format("'{}' is not an earlier text input with a tokenizer", in.text.from));
        TextSpec t = src->text;
        t.from = in.text.from;
        t.output = in.text.output;
        t.dtype = in.text.dtype;
        in.text = std::move(t);
      }
      spec.inputs.push_back(std::move(in));
    }
    if (auto* outputs = Optional(top, "outputs")) {
      if (!outputs->node.IsSequence()) return Expected(*outputs, "outputs", "a list");
      for (size_t i = 0; i < outputs->node.size(); ++i) {
        std::string path = fmt::format("outputs[{}]", i);
        Entry item{outputs->node[i], LineOf(outputs->node[i], outputs->line)};
        FERRY_ASSIGN_OR_RETURN(OutputSpec out, Output(item, path, spec));
        for (const auto& other : spec.outputs)
          if (other.name == out.name)
            return Error(item.line, path + ".name", fmt::format("'{}' given twice", out.name));
        spec.outputs.push_back(std::move(out));
      }
    }
    return spec;
  }

  Result<std::vector<std::string>> Strings(const Entry& e, const std::string& key) const {
    if (!e.node.IsSequence() || e.node.size() > 100000)
      return Expected(e, key, "a list of strings (at most 100,000)");
    std::vector<std::string> out;
    for (size_t i = 0; i < e.node.size(); ++i) {
      Entry item{e.node[i], LineOf(e.node[i], e.line)};
      FERRY_ASSIGN_OR_RETURN(std::string v, String(item, fmt::format("{}[{}]", key, i)));
      out.push_back(std::move(v));
    }
    return out;
  }

  Result<OutputSpec> Output(const Entry& e, const std::string& path, const Spec& spec) {
    OutputSpec o;
    FERRY_ASSIGN_OR_RETURN(Map m, Open(e, path, {"name", "detect", "ctc"}));
    FERRY_ASSIGN_OR_RETURN(Entry name, Required(m, "name", path, e.line));
    FERRY_ASSIGN_OR_RETURN(o.name, String(name, path + ".name"));
    const Entry* detect = Optional(m, "detect");
    const Entry* ctc = Optional(m, "ctc");
    if ((detect != nullptr) == (ctc != nullptr))
      return Error(e.line, path, "expected exactly one of detect and ctc");
    if (detect) {
      const std::string dp = path + ".detect";
      o.kind = OutputSpec::Kind::kDetect;
      FERRY_ASSIGN_OR_RETURN(Map d, Open(*detect, dp,
                                         {"format", "score_threshold", "iou_threshold",
                                          "max_detections", "class_agnostic", "input", "labels"}));
      FERRY_ASSIGN_OR_RETURN(Entry format, Required(d, "format", dp, detect->line));
      FERRY_ASSIGN_OR_RETURN(o.format, Choice(format, dp + ".format", {"yolov8"}));
      if (auto* v = Optional(d, "score_threshold")) {
        FERRY_ASSIGN_OR_RETURN(o.score_threshold, Number(*v, dp + ".score_threshold"));
      }
      if (auto* v = Optional(d, "iou_threshold")) {
        FERRY_ASSIGN_OR_RETURN(o.iou_threshold, Number(*v, dp + ".iou_threshold"));
      }
      if (auto* v = Optional(d, "max_detections")) {
        FERRY_ASSIGN_OR_RETURN(o.max_detections, Int(*v, dp + ".max_detections", 1, 100000));
      }
      if (auto* v = Optional(d, "class_agnostic")) {
        FERRY_ASSIGN_OR_RETURN(o.class_agnostic, Bool(*v, dp + ".class_agnostic"));
      }
      if (auto* v = Optional(d, "input")) {
        FERRY_ASSIGN_OR_RETURN(o.input, String(*v, dp + ".input"));
        bool known = false;
        for (const auto& in : spec.inputs) known = known || in.name == o.input;
        if (!known) return Expected(*v, dp + ".input", "the name of one of the spec's inputs");
      }
      if (auto* v = Optional(d, "labels")) {
        FERRY_ASSIGN_OR_RETURN(o.labels, Strings(*v, dp + ".labels"));
      }
    } else {
      const std::string cp = path + ".ctc";
      o.kind = OutputSpec::Kind::kCtc;
      FERRY_ASSIGN_OR_RETURN(Map c, Open(*ctc, cp, {"blank", "charset"}));
      if (auto* v = Optional(c, "blank")) {
        FERRY_ASSIGN_OR_RETURN(o.blank, Int(*v, cp + ".blank", 0, 1000000));
      }
      FERRY_ASSIGN_OR_RETURN(Entry cs, Required(c, "charset", cp, ctc->line));
      FERRY_ASSIGN_OR_RETURN(o.charset, Strings(cs, cp + ".charset"));
    }
    return o;
  }

  Result<InputSpec> Input(const Entry& e, const std::string& path) {
    InputSpec in;
    FERRY_ASSIGN_OR_RETURN(Map m, Open(e, path, {"name", "image", "table", "text"}));
    FERRY_ASSIGN_OR_RETURN(Entry name, Required(m, "name", path, e.line));
    FERRY_ASSIGN_OR_RETURN(in.name, String(name, path + ".name"));
    bool ok_name = in.name.size() <= 128;
    for (char c : in.name)
      if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '-' || c == '.' ||
            c == ':' || c == '/'))
        ok_name = false;
    if (!ok_name || in.name == "." || in.name == "..")
      return Expected(name, path + ".name", "letters, digits, _ - . : / (at most 128)");
    const Entry* image = Optional(m, "image");
    const Entry* table = Optional(m, "table");
    const Entry* text = Optional(m, "text");
    if ((image != nullptr) + (table != nullptr) + (text != nullptr) != 1)
      return Error(e.line, path, "expected exactly one of image, table and text");
    if (text) {
      in.text_input = true;
      FERRY_ASSIGN_OR_RETURN(in.text, Text(*text, path + ".text"));
    } else if (image) {
      FERRY_ASSIGN_OR_RETURN(in.image, Image(*image, path + ".image"));
    } else {
      in.table_input = true;
      FERRY_ASSIGN_OR_RETURN(in.table, Table(*table, path + ".table"));
    }
    return in;
  }

  // text: {tokenizer, max_length, truncation, padding, pad_id, add_special_tokens, field,
  // output, dtype} or, for a companion input, {from, output, dtype}.
  Result<TextSpec> Text(const Entry& e, const std::string& path) {
    TextSpec t;
    FERRY_ASSIGN_OR_RETURN(
        Map m, Open(e, path,
                    {"tokenizer", "from", "output", "dtype", "max_length", "truncation", "padding",
                     "pad_id", "add_special_tokens", "field"}));
    if (auto* o = Optional(m, "output")) {
      FERRY_ASSIGN_OR_RETURN(std::string v,
                             Choice(*o, path + ".output", {"ids", "attention_mask", "type_ids"}));
      t.output = v == "ids"              ? TextSpec::Output::kIds
                 : v == "attention_mask" ? TextSpec::Output::kAttentionMask
                                         : TextSpec::Output::kTypeIds;
    }
    if (auto* d = Optional(m, "dtype")) {
      FERRY_ASSIGN_OR_RETURN(std::string v, Choice(*d, path + ".dtype", {"int64", "int32"}));
      t.dtype = v == "int64" ? DType::kInt64 : DType::kInt32;
    }
    const Entry* from = Optional(m, "from");
    const Entry* tok = Optional(m, "tokenizer");
    if ((from != nullptr) == (tok != nullptr))
      return Error(e.line, path,
                   "expected exactly one of tokenizer (a tokenizer.json) and from (the text "
                   "input whose tokenizer this one shares)");
    if (from) {
      for (const char* k :
           {"max_length", "truncation", "padding", "pad_id", "add_special_tokens", "field"})
        if (auto* x = Optional(m, k))
          return Error(x->line, Join(path, k),
                       "set on the input named by `from`, not on a companion input");
      FERRY_ASSIGN_OR_RETURN(t.from, String(*from, path + ".from"));
      return t;
    }
    FERRY_ASSIGN_OR_RETURN(t.tokenizer_path, String(*tok, path + ".tokenizer"));
    std::filesystem::path tp(t.tokenizer_path);
    if (tp.is_relative()) tp = std::filesystem::path(file_).parent_path() / tp;
    auto loaded = Tokenizer::Load(tp.string());
    if (!loaded.ok())  // kInvalid, or kUnsupported for a component Ferry does not run
      return Status(loaded.status().code(),
                    Error(tok->line, path + ".tokenizer", loaded.status().message()).message());
    t.tokenizer = std::shared_ptr<const Tokenizer>(std::move(*loaded));
    t.tokenizer_path = tp.string();
    if (auto* x = Optional(m, "max_length")) {
      FERRY_ASSIGN_OR_RETURN(t.max_length, Int(*x, path + ".max_length", 1, 1'000'000));
      if (t.max_length < t.tokenizer->NumSpecialTokens())
        return Error(x->line, path + ".max_length",
                     fmt::format("{} is less than the {} special tokens the tokenizer adds",
                                 t.max_length, t.tokenizer->NumSpecialTokens()));
      t.padding = TextSpec::Padding::kMaxLength;
    }
    if (auto* x = Optional(m, "truncation")) {
      if (x->node.IsScalar() && x->node.Scalar() == "error") {
        t.truncation = TextSpec::Truncation::kError;
      } else {
        if (!(x->node.IsScalar() && x->node.Scalar() == "true"))
          return Expected(*x, path + ".truncation", "true|error");
      }
    }
    if (auto* x = Optional(m, "padding")) {
      FERRY_ASSIGN_OR_RETURN(
          std::string v, Choice(*x, path + ".padding", {"max_length", "longest", "none", "file"}));
      t.padding = v == "max_length" ? TextSpec::Padding::kMaxLength
                  : v == "longest"  ? TextSpec::Padding::kLongest
                  : v == "none"     ? TextSpec::Padding::kNone
                                    : TextSpec::Padding::kFile;
      if (t.padding == TextSpec::Padding::kMaxLength && t.max_length == 0 &&
          !t.tokenizer->truncation().enabled)
        return Error(x->line, path + ".padding",
                     "max_length padding needs max_length (the tokenizer.json has no "
                     "truncation length)");
    }
    if (t.truncation == TextSpec::Truncation::kError && t.max_length == 0 &&
        !t.tokenizer->truncation().enabled)
      return Error(e.line, path + ".truncation",
                   "error needs max_length (the tokenizer.json has no truncation length)");
    if (auto* x = Optional(m, "pad_id")) {
      FERRY_ASSIGN_OR_RETURN(t.pad_id, Int(*x, path + ".pad_id", 0, 4294967295LL));
      t.has_pad_id = true;
    }
    if (auto* x = Optional(m, "add_special_tokens")) {
      FERRY_ASSIGN_OR_RETURN(t.add_special_tokens, Bool(*x, path + ".add_special_tokens"));
    }
    if (auto* x = Optional(m, "field")) {
      FERRY_ASSIGN_OR_RETURN(t.field, String(*x, path + ".field"));
    }
    return t;
  }

  Result<TableSpec> Table(const Entry& e, const std::string& path) {
    TableSpec t;
    FERRY_ASSIGN_OR_RETURN(Map m, Open(e, path, {"columns", "dtype"}));
    if (auto* d = Optional(m, "dtype")) {
      FERRY_ASSIGN_OR_RETURN(std::string v,
                             Choice(*d, path + ".dtype", {"float32", "int64", "string"}));
      t.dtype = v == "float32" ? DType::kFloat : v == "int64" ? DType::kInt64 : DType::kString;
    }
    FERRY_ASSIGN_OR_RETURN(Entry cols, Required(m, "columns", path, e.line));
    if (!cols.node.IsSequence() || cols.node.size() == 0 || cols.node.size() > 10000)
      return Expected(cols, path + ".columns", "a non-empty list of columns (at most 10,000)");
    for (size_t i = 0; i < cols.node.size(); ++i) {
      const std::string cp = fmt::format("{}.columns[{}]", path, i);
      Entry item{cols.node[i], LineOf(cols.node[i], cols.line)};
      FERRY_ASSIGN_OR_RETURN(Map c, Open(item, cp, {"field", "number", "category", "text"}));
      ColumnSpec col;
      FERRY_ASSIGN_OR_RETURN(Entry field, Required(c, "field", cp, item.line));
      FERRY_ASSIGN_OR_RETURN(col.field, String(field, cp + ".field"));
      const Entry* number = Optional(c, "number");
      const Entry* category = Optional(c, "category");
      const Entry* text = Optional(c, "text");
      if ((number != nullptr) + (category != nullptr) + (text != nullptr) != 1)
        return Error(item.line, cp, "expected exactly one of number, category and text");
      if (number) {
        const std::string np = cp + ".number";
        col.kind = ColumnSpec::Kind::kNumber;
        if (!number->node.IsNull()) {
          FERRY_ASSIGN_OR_RETURN(Map n,
                                 Open(*number, np, {"missing", "clip", "scale", "mean", "std"}));
          if (auto* v = Optional(n, "missing")) {
            col.has_missing = true;
            FERRY_ASSIGN_OR_RETURN(col.missing, Number(*v, np + ".missing"));
          }
          if (auto* v = Optional(n, "clip")) {
            FERRY_ASSIGN_OR_RETURN(std::vector<double> lohi, Numbers(*v, np + ".clip", 2));
            if (!(lohi[0] <= lohi[1]))
              return Expected(*v, np + ".clip", "[min, max] with min <= max");
            col.has_clip = true;
            col.clip_min = lohi[0];
            col.clip_max = lohi[1];
          }
          if (auto* v = Optional(n, "scale")) {
            FERRY_ASSIGN_OR_RETURN(col.scale, Number(*v, np + ".scale"));
          }
          if (auto* v = Optional(n, "mean")) {
            FERRY_ASSIGN_OR_RETURN(col.mean, Number(*v, np + ".mean"));
          }
          if (auto* v = Optional(n, "std")) {
            FERRY_ASSIGN_OR_RETURN(col.std, Number(*v, np + ".std"));
            if (col.std == 0) return Expected(*v, np + ".std", "a non-zero number");
          }
        }
        if (t.dtype == DType::kString)
          return Error(item.line, cp, "a number column in a string table (use text)");
      } else if (category) {
        const std::string kp = cp + ".category";
        col.kind = ColumnSpec::Kind::kCategory;
        FERRY_ASSIGN_OR_RETURN(Map k, Open(*category, kp, {"vocabulary", "encoding", "unknown"}));
        FERRY_ASSIGN_OR_RETURN(Entry vocab, Required(k, "vocabulary", kp, category->line));
        FERRY_ASSIGN_OR_RETURN(col.vocabulary, Strings(vocab, kp + ".vocabulary"));
        if (col.vocabulary.empty()) return Expected(vocab, kp + ".vocabulary", "a non-empty list");
        if (auto* v = Optional(k, "encoding")) {
          FERRY_ASSIGN_OR_RETURN(std::string enc,
                                 Choice(*v, kp + ".encoding", {"one_hot", "index"}));
          col.one_hot = enc == "one_hot";
        }
        if (auto* v = Optional(k, "unknown")) {
          FERRY_ASSIGN_OR_RETURN(std::string u, Choice(*v, kp + ".unknown", {"error", "zeros"}));
          col.unknown_zeros = u == "zeros";
        }
        if (t.dtype == DType::kString)
          return Error(item.line, cp, "a category column in a string table (use text)");
      } else {
        col.kind = ColumnSpec::Kind::kText;
        if (!text->node.IsNull() && !(text->node.IsMap() && text->node.size() == 0))
          return Expected(*text, cp + ".text", "{} (no options)");
        if (t.dtype != DType::kString)
          return Error(item.line, cp, "a text column needs dtype: string");
      }
      t.columns.push_back(std::move(col));
    }
    if (t.width() > (int64_t{1} << 20))
      return Error(cols.line, path + ".columns", "more than 2^20 features per row");
    return t;
  }

  Result<ImageSpec> Image(const Entry& e, const std::string& path) {
    ImageSpec s;
    int float_line = 0;  // resize.tensor: float, checked against dtype below
    FERRY_ASSIGN_OR_RETURN(
        Map m, Open(e, path,
                    {"decode", "color", "alpha", "library", "resize", "crop", "scale", "mean",
                     "std", "pad", "layout", "batch", "dtype", "gray", "normalize_dtype"}));
    // decode: exif is stated, never implied.
    FERRY_ASSIGN_OR_RETURN(Entry decode, Required(m, "decode", path, e.line));
    std::string dpath = path + ".decode";
    FERRY_ASSIGN_OR_RETURN(Map d, Open(decode, dpath, {"exif", "max_pixels"}));
    FERRY_ASSIGN_OR_RETURN(Entry exif, Required(d, "exif", dpath, decode.line));
    FERRY_ASSIGN_OR_RETURN(std::string ex, Choice(exif, dpath + ".exif", {"apply", "ignore"}));
    s.exif = ex == "apply" ? ExifMode::kApply : ExifMode::kIgnore;
    if (auto* mp = Optional(d, "max_pixels")) {
      FERRY_ASSIGN_OR_RETURN(s.max_pixels, Int(*mp, dpath + ".max_pixels", 1, int64_t{1} << 40));
    }
    FERRY_ASSIGN_OR_RETURN(Entry color, Required(m, "color", path, e.line));
    FERRY_ASSIGN_OR_RETURN(std::string c, Choice(color, path + ".color", {"rgb", "bgr", "gray"}));
    s.color = c == "rgb" ? Color::kRgb : c == "bgr" ? Color::kBgr : Color::kGray;
    if (auto* a = Optional(m, "alpha")) {
      // alpha: drop | {composite: [R, G, B]}
      std::string apath = path + ".alpha";
      if (a->node.IsScalar()) {
        FERRY_ASSIGN_OR_RETURN(std::string v, Choice(*a, apath, {"drop"}));
        (void)v;
      } else {
        FERRY_ASSIGN_OR_RETURN(Map am, Open(*a, apath, {"composite"}));
        FERRY_ASSIGN_OR_RETURN(Entry comp, Required(am, "composite", apath, a->line));
        if (!comp.node.IsSequence() || comp.node.size() != 3)
          return Expected(comp, apath + ".composite", "a list of 3 integers (R, G, B) in [0, 255]");
        for (int k = 0; k < 3; ++k) {
          Entry item{comp.node[k], LineOf(comp.node[k], comp.line)};
          FERRY_ASSIGN_OR_RETURN(int64_t v,
                                 Int(item, fmt::format("{}.composite[{}]", apath, k), 0, 255));
          s.background[k] = static_cast<uint8_t>(v);
        }
        s.composite_alpha = true;
      }
    }
    if (auto* r = Optional(m, "resize")) {
      std::string rpath = path + ".resize";
      FERRY_ASSIGN_OR_RETURN(Map rm, Open(*r, rpath,
                                          {"size", "shorter_side", "longer_side", "height", "width",
                                           "min_side", "max_side", "multiple_of", "round", "filter",
                                           "fit", "pad_value", "tensor"}));
      ResizeSpec rs;
      const Entry* size = Optional(rm, "size");
      const Entry* shorter = Optional(rm, "shorter_side");
      const Entry* longer = Optional(rm, "longer_side");
      const Entry* height = Optional(rm, "height");
      const Entry* width = Optional(rm, "width");
      const Entry* min_side = Optional(rm, "min_side");
      const Entry* max_side = Optional(rm, "max_side");
      const Entry* multiple = Optional(rm, "multiple_of");
      const int modes = (size != nullptr) + (shorter != nullptr || longer != nullptr) +
                        (height != nullptr) + (min_side != nullptr) + (max_side != nullptr);
      if (modes != 1)
        return Error(r->line, rpath,
                     "expected exactly one of size: [H, W], shorter_side: N / longer_side: M, "
                     "height: N, min_side: L and max_side: L");
      if (width && !height) return Error(width->line, rpath + ".width", "only with height: N");
      if (multiple && !min_side && !max_side)
        return Error(multiple->line, rpath + ".multiple_of", "only with min_side or max_side");
      if (height) {
        FERRY_ASSIGN_OR_RETURN(rs.line_height, Int(*height, rpath + ".height", 1, 65536));
        if (width) {
          std::string wpath = rpath + ".width";
          FERRY_ASSIGN_OR_RETURN(Map wm, Open(*width, wpath, {"round", "max", "arithmetic"}));
          if (auto* ar = Optional(wm, "arithmetic")) {
            FERRY_ASSIGN_OR_RETURN(
                std::string v, Choice(*ar, wpath + ".arithmetic", {"H * (w / h)", "w * (H / h)"}));
            rs.ratio_first = v == "H * (w / h)";
          }
          if (auto* rd = Optional(wm, "round")) {
            FERRY_ASSIGN_OR_RETURN(std::string v, Choice(*rd, wpath + ".round", {"ceil", "floor"}));
            rs.width_ceil = v == "ceil";
          }
          if (auto* mx = Optional(wm, "max")) {
            FERRY_ASSIGN_OR_RETURN(rs.max_width, Int(*mx, wpath + ".max", 1, 65536));
          }
        }
      }
      if (min_side) {
        FERRY_ASSIGN_OR_RETURN(rs.min_side, Int(*min_side, rpath + ".min_side", 1, 65536));
      }
      if (max_side) {
        FERRY_ASSIGN_OR_RETURN(rs.max_side, Int(*max_side, rpath + ".max_side", 1, 65536));
      }
      if (multiple) {
        FERRY_ASSIGN_OR_RETURN(rs.multiple_of, Int(*multiple, rpath + ".multiple_of", 1, 4096));
      }
      if (size) {
        FERRY_ASSIGN_OR_RETURN(auto hw, Size(*size, rpath + ".size"));
        rs.height = hw.first;
        rs.width = hw.second;
      }
      if (shorter) {
        FERRY_ASSIGN_OR_RETURN(rs.shorter_side, Int(*shorter, rpath + ".shorter_side", 1, 65536));
      }
      if (longer) {
        FERRY_ASSIGN_OR_RETURN(rs.longer_side, Int(*longer, rpath + ".longer_side", 1, 65536));
        if (shorter && rs.longer_side <= rs.shorter_side)
          return Error(longer->line, rpath + ".longer_side",
                       fmt::format("must be greater than shorter_side ({}), as torchvision's "
                                   "max_size must",
                                   rs.shorter_side));
      }
      if (auto* rd = Optional(rm, "round")) {
        FERRY_ASSIGN_OR_RETURN(std::string v,
                               Choice(*rd, rpath + ".round", {"floor", "half_even"}));
        rs.round_half_even = v == "half_even";
        if (!shorter || longer)
          return Error(rd->line, rpath + ".round", "only with shorter_side alone");
      }
      FERRY_ASSIGN_OR_RETURN(Entry filter, Required(rm, "filter", rpath, r->line));
      std::vector<std::string> names;
      for (const auto& f : kFilters) names.push_back(f.name);
      FERRY_ASSIGN_OR_RETURN(std::string fname, Choice(filter, rpath + ".filter", names));
      rs.filter = *ParseFilter(fname);
      if (auto* fit = Optional(rm, "fit")) {
        FERRY_ASSIGN_OR_RETURN(
            std::string f, Choice(*fit, rpath + ".fit",
                                  {"stretch", "letterbox", "letterbox_top_left", "pad_to_square"}));
        rs.letterbox = f == "letterbox" || f == "letterbox_top_left";
        rs.top_left = f == "letterbox_top_left";
        rs.pad_square = f == "pad_to_square";
        if ((rs.letterbox || rs.pad_square) && !size)
          return Error(fit->line, rpath + ".fit", fmt::format("{} needs size: [H, W]", f));
      }
      if (auto* pad = Optional(rm, "pad_value")) {
        if (!rs.letterbox && !rs.pad_square)
          return Error(pad->line, rpath + ".pad_value",
                       "only with fit: letterbox or pad_to_square");
        FERRY_ASSIGN_OR_RETURN(int64_t pv, Int(*pad, rpath + ".pad_value", 0, 255));
        rs.pad_value = static_cast<int>(pv);
      }
      if (auto* tensor = Optional(rm, "tensor")) {
        FERRY_ASSIGN_OR_RETURN(std::string v,
                               Choice(*tensor, rpath + ".tensor", {"uint8", "float"}));
        rs.float_tensor = v == "float";
        if (rs.float_tensor && rs.filter != Filter::kTorchvisionBilinear &&
            rs.filter != Filter::kTorchvisionBilinearAa)
          return Error(tensor->line, rpath + ".tensor", "float only with a torchvision_* filter");
        if (rs.float_tensor && (rs.letterbox || rs.pad_square))
          return Error(tensor->line, rpath + ".tensor",
                       "float is not supported with letterbox / pad_to_square");
        if (rs.float_tensor && (rs.line_height || rs.min_side || rs.max_side))
          return Error(tensor->line, rpath + ".tensor",
                       "float is not supported with height / min_side / max_side");
        float_line = tensor->line;
      }
      s.library = FilterLibrary(rs.filter);
      s.resize = rs;
    }
    if (auto* lib = Optional(m, "library")) {
      FERRY_ASSIGN_OR_RETURN(std::string v, Choice(*lib, path + ".library", {"pil", "cv2"}));
      Library l = v == "pil" ? Library::kPil : Library::kCv2;
      if (s.resize && l != s.library)
        return Error(
            lib->line, path + ".library",
            fmt::format("'{}' disagrees with resize.filter '{}'", v, FilterName(s.resize->filter)));
      s.library = l;
    }
    if (auto* g = Optional(m, "gray")) {
      FERRY_ASSIGN_OR_RETURN(std::string v,
                             Choice(*g, path + ".gray", {"before_resize", "after_resize"}));
      s.gray_after_resize = v == "after_resize";
      if (s.gray_after_resize && s.color != Color::kGray)
        return Error(g->line, path + ".gray", "only with color: gray");
      if (s.gray_after_resize && s.resize && (s.resize->letterbox || s.resize->float_tensor))
        return Error(g->line, path + ".gray",
                     "after_resize is not supported with fit: letterbox or tensor: float");
    }
    if (auto* cr = Optional(m, "crop")) {
      std::string cpath = path + ".crop";
      FERRY_ASSIGN_OR_RETURN(Map cm, Open(*cr, cpath, {"center", "round"}));
      FERRY_ASSIGN_OR_RETURN(Entry center, Required(cm, "center", cpath, cr->line));
      FERRY_ASSIGN_OR_RETURN(auto hw, Size(center, cpath + ".center"));
      s.crop_height = hw.first;
      s.crop_width = hw.second;
      if (auto* rd = Optional(cm, "round")) {
        FERRY_ASSIGN_OR_RETURN(std::string v,
                               Choice(*rd, cpath + ".round", {"half_even", "floor"}));
        s.crop_floor = v == "floor";
      }
    }
    if (auto* l = Optional(m, "layout")) {
      FERRY_ASSIGN_OR_RETURN(std::string v, Choice(*l, path + ".layout", {"hwc", "chw"}));
      s.layout = v == "hwc" ? Layout::kHwc : Layout::kChw;
    }
    if (auto* b = Optional(m, "batch")) {
      FERRY_ASSIGN_OR_RETURN(s.batch, Bool(*b, path + ".batch"));
    }
    if (auto* t = Optional(m, "dtype")) {
      FERRY_ASSIGN_OR_RETURN(std::string v, Choice(*t, path + ".dtype", {"float32", "uint8"}));
      s.dtype = v == "uint8" ? DType::kUint8 : DType::kFloat;
    }
    if (float_line && s.dtype != DType::kFloat)
      return Error(float_line, path + ".resize.tensor", "float needs dtype: float32");
    const int channels = s.color == Color::kGray ? 1 : 3;
    for (const char* key : {"scale", "mean", "std"}) {
      auto* k = Optional(m, key);
      if (!k) continue;
      std::string kpath = Join(path, key);
      if (s.dtype != DType::kFloat)
        return Error(k->line, kpath, "only with dtype float32 (uint8 keeps the pixels)");
      if (std::string(key) == "scale" && k->node.IsMap()) {
        // scale: {divide: D}: pixel / D (NumPy's img / 255), not pixel * (1 / D).
        FERRY_ASSIGN_OR_RETURN(Map sm, Open(*k, kpath, {"divide"}));
        FERRY_ASSIGN_OR_RETURN(Entry dv, Required(sm, "divide", kpath, k->line));
        FERRY_ASSIGN_OR_RETURN(s.divide, Number(dv, kpath + ".divide"));
        if (s.divide <= 0) return Expected(dv, kpath + ".divide", "a number > 0");
        continue;
      }
      if (std::string(key) == "scale") {
        FERRY_ASSIGN_OR_RETURN(s.scale, Number(*k, kpath));
        if (s.scale == 0) return Expected(*k, kpath, "a non-zero number");
        continue;
      }
      FERRY_ASSIGN_OR_RETURN(std::vector<double> v, Numbers(*k, kpath, 0));
      if (v.size() != 1 && static_cast<int>(v.size()) != channels)
        return Error(k->line, kpath,
                     fmt::format("expected 1 or {} values (one per channel of color '{}'), got {}",
                                 channels, c, v.size()));
      if (std::string(key) == "std") {
        for (double x : v)
          if (x == 0) return Error(k->line, kpath, "a std of 0 divides by zero");
        s.std = v;
      } else {
        s.mean = v;
      }
    }
    if (auto* nd = Optional(m, "normalize_dtype")) {
      FERRY_ASSIGN_OR_RETURN(std::string v,
                             Choice(*nd, path + ".normalize_dtype", {"float32", "float64"}));
      if (s.dtype != DType::kFloat)
        return Error(nd->line, path + ".normalize_dtype", "only with dtype float32");
      s.normalize_f64 = v == "float64";
    }
    if (auto* pd = Optional(m, "pad")) {
      // pad: {to: [H, W], align: top_left, value: V}, after the float conversion.
      std::string ppath = path + ".pad";
      FERRY_ASSIGN_OR_RETURN(Map pm, Open(*pd, ppath, {"to", "align", "value", "grow"}));
      if (auto* gr = Optional(pm, "grow")) {
        FERRY_ASSIGN_OR_RETURN(std::string v,
                               Choice(*gr, ppath + ".grow", {"false", "true", "batch"}));
        s.pad_grow = v != "false";
        s.pad_grow_batch = v == "batch";
        if (s.pad_grow && !(s.resize && s.resize->line_height))
          return Error(gr->line, ppath + ".grow", "only with resize.height");
      }
      FERRY_ASSIGN_OR_RETURN(Entry to, Required(pm, "to", ppath, pd->line));
      FERRY_ASSIGN_OR_RETURN(auto hw, Size(to, ppath + ".to"));
      s.pad_height = hw.first;
      s.pad_width = hw.second;
      if (auto* al = Optional(pm, "align")) {
        FERRY_ASSIGN_OR_RETURN(std::string v, Choice(*al, ppath + ".align", {"top_left"}));
        (void)v;
      }
      if (auto* pv = Optional(pm, "value")) {
        if (s.dtype == DType::kUint8) {
          FERRY_ASSIGN_OR_RETURN(int64_t v, Int(*pv, ppath + ".value", 0, 255));
          s.pad_value = static_cast<double>(v);
        } else {
          FERRY_ASSIGN_OR_RETURN(s.pad_value, Number(*pv, ppath + ".value"));
        }
      }
    }
    return s;
  }

 private:
  std::string file_;
};

const char* LibraryName(Library l) {
  return l == Library::kPil ? "pil" : "cv2";
}

}  // namespace

const char* FilterName(Filter f) {
  return kFilters[static_cast<int>(f)].name;
}
Library FilterLibrary(Filter f) {
  return kFilters[static_cast<int>(f)].library;
}
std::optional<Filter> ParseFilter(const std::string& name) {
  for (const auto& f : kFilters)
    if (name == f.name) return f.id;
  return std::nullopt;
}

Result<Spec> ParseSpec(const std::string& text, const std::string& path) {
  YAML::Node root;
  try {
    root = YAML::Load(text);
  } catch (const YAML::Exception& e) {
    int line = e.mark.is_null() ? 1 : e.mark.line + 1;
    return InvalidError("{}:{}: not valid YAML: {}", path, line, e.msg);
  }
  Parser p(path);
  try {
    return p.Top(root);
  } catch (const YAML::Exception& e) {
    int line = e.mark.is_null() ? 1 : e.mark.line + 1;
    return InvalidError("{}:{}: {}", path, line, e.msg);
  }
}

Result<Spec> LoadSpec(const std::string& path) {
  std::error_code ec;
  if (!std::filesystem::is_regular_file(path, ec))
    return InvalidError("spec '{}': no such file", path);
  FERRY_ASSIGN_OR_RETURN(std::string text, ReadFileBytes(path));
  return ParseSpec(text, path);
}

int64_t TableSpec::width() const {
  int64_t w = 0;
  for (const auto& c : columns)
    w += c.kind == ColumnSpec::Kind::kCategory && c.one_hot
             ? static_cast<int64_t>(c.vocabulary.size())
             : 1;
  return w;
}

std::vector<int64_t> OutputShape(const ImageSpec& spec) {
  int64_t c = spec.color == Color::kGray ? 1 : 3, h = -1, w = -1;
  if (spec.resize && !spec.resize->keep_aspect()) {
    h = spec.resize->height;
    w = spec.resize->width;
  }
  if (spec.crop_height > 0) {
    h = spec.crop_height;
    w = spec.crop_width;
  }
  if (spec.pad_height > 0) {
    h = spec.pad_height;  // a larger image is an error (pipeline)
    w = spec.pad_grow ? -1 : spec.pad_width;
  }
  std::vector<int64_t> dims;
  if (spec.batch) dims.push_back(1);
  if (spec.layout == Layout::kChw) {
    dims.insert(dims.end(), {c, h, w});
  } else {
    dims.insert(dims.end(), {h, w, c});
  }
  return dims;
}

std::string SpecToJson(const Spec& spec) {
  nlohmann::json j;
  j["version"] = 1;
  j["inputs"] = nlohmann::json::array();
  for (const auto& in : spec.inputs) {
    if (in.is_text()) {
      const TextSpec& t = in.text;
      static const char* kOutputs[] = {"ids", "attention_mask", "type_ids"};
      static const char* kPadding[] = {"file", "max_length", "longest", "none"};
      nlohmann::json x = {
          {"tokenizer", t.tokenizer_path},
          {"output", kOutputs[static_cast<int>(t.output)]},
          {"dtype", t.dtype == DType::kInt64 ? "int64" : "int32"},
          {"max_length", t.max_length},
          {"truncation", t.truncation == TextSpec::Truncation::kCut ? "true" : "error"},
          {"padding", kPadding[static_cast<int>(t.padding)]},
          {"add_special_tokens", t.add_special_tokens},
          {"field", t.field}};
      x["pad_id"] = t.has_pad_id ? nlohmann::json(t.pad_id) : nlohmann::json(nullptr);
      if (!t.from.empty()) x["from"] = t.from;
      j["inputs"].push_back({{"name", in.name}, {"text", x}});
      continue;
    }
    if (in.is_table()) {
      nlohmann::json cols = nlohmann::json::array();
      for (const auto& c : in.table.columns) {
        nlohmann::json col = {{"field", c.field}};
        if (c.kind == ColumnSpec::Kind::kNumber) {
          nlohmann::json n = {{"scale", c.scale}, {"mean", c.mean}, {"std", c.std}};
          if (c.has_missing) n["missing"] = c.missing;
          if (c.has_clip) n["clip"] = {c.clip_min, c.clip_max};
          col["number"] = n;
        } else if (c.kind == ColumnSpec::Kind::kCategory) {
          col["category"] = {{"vocabulary", c.vocabulary},
                             {"encoding", c.one_hot ? "one_hot" : "index"},
                             {"unknown", c.unknown_zeros ? "zeros" : "error"}};
        } else {
          col["text"] = nlohmann::json::object();
        }
        cols.push_back(col);
      }
      const char* dt = in.table.dtype == DType::kFloat   ? "float32"
                       : in.table.dtype == DType::kInt64 ? "int64"
                                                         : "string";
      j["inputs"].push_back({{"name", in.name}, {"table", {{"columns", cols}, {"dtype", dt}}}});
      continue;
    }
    const ImageSpec& s = in.image;
    nlohmann::json im;
    im["decode"] = {{"exif", s.exif == ExifMode::kApply ? "apply" : "ignore"},
                    {"max_pixels", s.max_pixels}};
    im["color"] = s.color == Color::kRgb ? "rgb" : s.color == Color::kBgr ? "bgr" : "gray";
    if (s.composite_alpha)
      im["alpha"] = {{"composite", {s.background[0], s.background[1], s.background[2]}}};
    else
      im["alpha"] = "drop";
    im["library"] = LibraryName(s.library);
    if (s.resize) {
      nlohmann::json r;
      if (s.resize->shorter_side) r["shorter_side"] = s.resize->shorter_side;
      if (s.resize->longer_side) r["longer_side"] = s.resize->longer_side;
      if (s.resize->round_half_even) r["round"] = "half_even";
      if (!s.resize->keep_aspect()) r["size"] = {s.resize->height, s.resize->width};
      if (s.resize->line_height) {
        r["height"] = s.resize->line_height;
        r["width"] = {{"round", s.resize->width_ceil ? "ceil" : "floor"},
                      {"arithmetic", s.resize->ratio_first ? "H * (w / h)" : "w * (H / h)"}};
        if (s.resize->max_width) r["width"]["max"] = s.resize->max_width;
      }
      if (s.resize->min_side) r["min_side"] = s.resize->min_side;
      if (s.resize->max_side) r["max_side"] = s.resize->max_side;
      if (s.resize->min_side || s.resize->max_side) r["multiple_of"] = s.resize->multiple_of;
      r["filter"] = FilterName(s.resize->filter);
      if (s.resize->float_tensor) r["tensor"] = "float";
      if (s.resize->letterbox || s.resize->pad_square) {
        r["fit"] = s.resize->top_left    ? "letterbox_top_left"
                   : s.resize->letterbox ? "letterbox"
                                         : "pad_to_square";
        r["pad_value"] = s.resize->pad_value;
      }
      im["resize"] = r;
    }
    if (s.crop_height)
      im["crop"] = {{"center", {s.crop_height, s.crop_width}},
                    {"round", s.crop_floor ? "floor" : "half_even"}};
    if (s.dtype == DType::kFloat) {
      if (s.divide > 0)
        im["scale"] = {{"divide", s.divide}};
      else
        im["scale"] = s.scale;
      if (!s.mean.empty()) im["mean"] = s.mean;
      if (!s.std.empty()) im["std"] = s.std;
    }
    if (s.gray_after_resize) im["gray"] = "after_resize";
    if (s.normalize_f64) im["normalize_dtype"] = "float64";
    if (s.pad_height)
      im["pad"] = {
          {"to", {s.pad_height, s.pad_width}},
          {"grow", s.pad_grow_batch ? nlohmann::json("batch") : nlohmann::json(s.pad_grow)},
          {"align", "top_left"},
          {"value", s.dtype == DType::kUint8 ? nlohmann::json(static_cast<int64_t>(s.pad_value))
                                             : nlohmann::json(s.pad_value)}};
    im["layout"] = s.layout == Layout::kHwc ? "hwc" : "chw";
    im["batch"] = s.batch;
    im["dtype"] = s.dtype == DType::kUint8 ? "uint8" : "float32";
    j["inputs"].push_back({{"name", in.name}, {"image", im}});
  }
  if (!spec.outputs.empty()) {
    j["outputs"] = nlohmann::json::array();
    for (const auto& o : spec.outputs) {
      nlohmann::json e;
      e["name"] = o.name;
      if (o.kind == OutputSpec::Kind::kDetect) {
        nlohmann::json d = {{"format", o.format},
                            {"score_threshold", o.score_threshold},
                            {"iou_threshold", o.iou_threshold},
                            {"max_detections", o.max_detections},
                            {"class_agnostic", o.class_agnostic}};
        if (!o.input.empty()) d["input"] = o.input;
        if (!o.labels.empty()) d["labels"] = o.labels;
        e["detect"] = d;
      } else {
        e["ctc"] = {{"blank", o.blank}, {"charset", o.charset}};
      }
      j["outputs"].push_back(e);
    }
  }
  return j.dump(2, ' ', false, nlohmann::json::error_handler_t::replace) + "\n";
}

}  // namespace ferry::prep
