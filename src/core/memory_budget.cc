#include "core/memory_budget.h"

#include <sys/resource.h>
#include <unistd.h>

#include <cctype>
#include <limits>

namespace ferry {

namespace {

std::atomic<uint64_t> g_default_max{0};

thread_local std::shared_ptr<MemoryBudget> t_budget;

uint64_t MachineShare() {
  const long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGESIZE);
  uint64_t share = pages > 0 && page > 0
                       ? static_cast<uint64_t>(pages) / 4 * 3 * static_cast<uint64_t>(page)
                       : uint64_t{8} << 30;
  rlimit as{};
  if (getrlimit(RLIMIT_AS, &as) == 0 && as.rlim_cur != RLIM_INFINITY)
    share = std::min<uint64_t>(share, static_cast<uint64_t>(as.rlim_cur) / 2);
  return share;
}

}  // namespace

MemoryBudget::MemoryBudget(uint64_t limit) : limit_(limit ? limit : DefaultMaxMemory()) {}

void MemoryBudget::Charge(uint64_t bytes) {
  const uint64_t now = in_use_.fetch_add(bytes, std::memory_order_relaxed) + bytes;
  uint64_t peak = peak_.load(std::memory_order_relaxed);
  while (now > peak && !peak_.compare_exchange_weak(peak, now, std::memory_order_relaxed)) {
  }
}

MemoryBudget::Scope::Scope(std::shared_ptr<MemoryBudget> budget)
    : previous_(std::exchange(t_budget, std::move(budget))) {}
MemoryBudget::Scope::~Scope() {
  t_budget = std::move(previous_);
}

const std::shared_ptr<MemoryBudget>& MemoryBudget::Current() {
  return t_budget;
}

uint64_t DefaultMaxMemory() {
  const uint64_t set = g_default_max.load(std::memory_order_relaxed);
  return set ? set : MachineShare();
}

void SetDefaultMaxMemory(uint64_t bytes) {
  g_default_max.store(bytes, std::memory_order_relaxed);
}

Result<uint64_t> TensorBytes(DType dtype, const Shape& shape, const std::string& what) {
  constexpr uint64_t kMax = uint64_t{1} << 63;
  uint64_t n = DTypeSize(dtype);
  for (int64_t d : shape) {
    if (d < 0) return InvalidError("{}: negative dim in {}", what, ShapeToString(shape));
    if (d != 0 && n > kMax / static_cast<uint64_t>(d))
      return InvalidError("{}: shape {} holds more than 2^63 bytes", what, ShapeToString(shape));
    n *= static_cast<uint64_t>(d);
  }
  return n;
}

Status CheckFits(const MemoryBudget* budget, uint64_t bytes, const std::string& what) {
  if (!budget || budget->Fits(bytes)) return Status::Ok();
  return InvalidError(
      "{} needs {}, over the memory budget ({} limit, {} in use; --max-memory / "
      "SessionOptions::max_memory)",
      what, FormatBytes(bytes), FormatBytes(budget->limit()), FormatBytes(budget->in_use()));
}

std::string FormatBytes(uint64_t bytes) {
  if (bytes < 1024) return fmt::format("{} B", bytes);
  const char* units[] = {"KiB", "MiB", "GiB", "TiB", "PiB", "EiB"};
  double v = static_cast<double>(bytes) / 1024;
  int u = 0;
  while (v >= 1024 && u < 5) {
    v /= 1024;
    ++u;
  }
  return fmt::format("{:.1f} {}", v, units[u]);
}

Result<uint64_t> ParseByteSize(const std::string& flag, const std::string& text) {
  size_t i = 0;
  uint64_t n = 0;
  while (i < text.size() && std::isdigit(static_cast<unsigned char>(text[i]))) {
    const uint64_t digit = static_cast<uint64_t>(text[i] - '0');
    if (n > (std::numeric_limits<uint64_t>::max() - digit) / 10)
      return UsageError("{}: '{}' is too large", flag, text);
    n = n * 10 + digit;
    ++i;
  }
  if (i == 0)
    return UsageError("{}: expected a size like 8G, 512M or 1000000, got '{}'", flag, text);
  std::string unit;
  for (; i < text.size(); ++i)
    unit += static_cast<char>(std::toupper(static_cast<unsigned char>(text[i])));
  int shift = -1;
  if (unit.empty() || unit == "B") shift = 0;
  const char* prefixes = "KMGT";
  for (int k = 0; k < 4; ++k) {
    const std::string p(1, prefixes[k]);
    if (unit == p || unit == p + "B" || unit == p + "IB") shift = 10 * (k + 1);
  }
  if (shift < 0)
    return UsageError("{}: unknown unit in '{}' (use K, M, G or T, binary multiples)", flag, text);
  if (shift > 0 && n > (std::numeric_limits<uint64_t>::max() >> shift))
    return UsageError("{}: '{}' is too large", flag, text);
  return n << shift;
}

}  // namespace ferry
