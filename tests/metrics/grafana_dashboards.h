// Reads the Grafana dashboards of dashboards/ for tests: their panels (rows' nested panels
// included), PromQL targets and template variables, and expands variables the way Grafana
// does before it sends a query to Prometheus.
#ifndef GPUPROF_TESTS_METRICS_GRAFANA_DASHBOARDS_H_
#define GPUPROF_TESTS_METRICS_GRAFANA_DASHBOARDS_H_

#include <map>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "google/protobuf/struct.pb.h"

namespace gpuprof::testing {

struct DashboardPanel {
  google::protobuf::Struct json;
  double id = 0;
  std::string type;
  std::string title;
};

struct Dashboard {
  std::string file;  // base name, for messages
  google::protobuf::Struct json;
  std::string uid;
  std::string title;
  // Every panel in order, rows and the panels inside collapsed rows included.
  std::vector<DashboardPanel> panels;
};

// Loads every *.json file of `directory`, sorted by name.
absl::StatusOr<std::vector<Dashboard>> LoadDashboards(const std::string& directory);

// Replaces $name, ${name} and ${name:format} with `values`; unknown names stay as they are,
// so callers can detect them.
std::string ExpandVariables(const std::string& text,
                            const std::map<std::string, std::string>& values);

// The names of the variables that `text` refers to ($name, ${name}, ${name:format}).
std::vector<std::string> ReferencedVariables(const std::string& text);

// Panels that can only show data on a machine with NVIDIA GPUs, keyed "<dashboard uid>/<panel
// title>", with the reason; a CPU-only run proves only that their expressions parse.
const std::map<std::string, std::string>& GpuOnlyPanels();
// Template variables whose values only exist on a GPU machine (Grafana then offers "All").
const std::map<std::string, std::string>& GpuOnlyVariables();

// The value Grafana puts in a multi-value variable: regex metacharacters escaped, several
// values joined as (a|b).
std::string GrafanaRegexValue(const std::vector<std::string>& values);

// The series of a query answer that hold at least one sample.
int SeriesWithSamples(const google::protobuf::Struct& data);

}  // namespace gpuprof::testing

#endif  // GPUPROF_TESTS_METRICS_GRAFANA_DASHBOARDS_H_
