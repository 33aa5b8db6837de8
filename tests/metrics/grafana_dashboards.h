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

}  // namespace gpuprof::testing

#endif  // GPUPROF_TESTS_METRICS_GRAFANA_DASHBOARDS_H_
