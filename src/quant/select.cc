#include "quant/select.h"

#include <algorithm>
#include <cmath>

namespace ferry::quant {

Result<Selection> SelectLayers(const std::vector<std::string>& layers, double budget,
                               const MeasureFn& measure,
                               const std::function<void(size_t, size_t)>& progress) {
  if (layers.empty()) return UsageError("layer selection: no quantizable layer");
  if (std::isnan(budget)) return UsageError("layer selection: the budget is NaN");
  Selection sel;
  sel.budget = budget;
  const std::set<std::string> all(layers.begin(), layers.end());
  const size_t total = layers.size() + 1;
  size_t done = 0;
  auto tick = [&] {
    if (progress) progress(done, total);
    ++done;
  };
  for (const auto& l : layers) {
    tick();
    std::set<std::string> others = all;
    others.erase(l);
    FERRY_ASSIGN_OR_RETURN(double m, measure(others));
    ++sel.measurements;
    sel.ranking.push_back({l, m});
  }
  std::stable_sort(sel.ranking.begin(), sel.ranking.end(),
                   [](const LayerCost& a, const LayerCost& b) {
                     // NaN (a layer that breaks the metric) ranks most sensitive.
                     if (std::isnan(a.solo) != std::isnan(b.solo)) return std::isnan(a.solo);
                     return a.solo > b.solo;
                   });
  tick();
  FERRY_ASSIGN_OR_RETURN(sel.metric_all, measure({}));
  ++sel.measurements;
  sel.metric = sel.metric_all;
  std::set<std::string> floated;
  auto within = [&](double m) { return !std::isnan(m) && m <= budget; };
  for (size_t i = 0; !within(sel.metric) && i + 1 < sel.ranking.size(); ++i) {
    const LayerCost& c = sel.ranking[i];
    floated.insert(c.layer);
    FERRY_ASSIGN_OR_RETURN(double m, measure(floated));
    ++sel.measurements;
    sel.steps.push_back({c.layer, c.solo, m});
    sel.kept_float.push_back(c.layer);
    sel.metric = m;
  }
  sel.met = within(sel.metric);
  return sel;
}

}  // namespace ferry::quant
