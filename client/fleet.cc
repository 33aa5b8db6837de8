#include "client/fleet.h"

#include <algorithm>
#include <fstream>
#include <set>
#include <sstream>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "common/status_macros.h"
#include "google/protobuf/io/tokenizer.h"
#include "google/protobuf/text_format.h"
#include "gpuprof/client/fleet.pb.h"

namespace gpuprof::client {
namespace {

constexpr absl::string_view kNameRule = "letters, digits, '.', '_' and '-'";

bool ValidName(absl::string_view name) {
  if (name.empty() || name.size() > 63) return false;
  for (char c : name) {
    if (!absl::ascii_isalnum(static_cast<unsigned char>(c)) && c != '.' && c != '_' && c != '-') {
      return false;
    }
  }
  return true;
}

absl::StatusOr<std::string> ReadPemFile(const std::string& path, const std::string& field) {
  std::ifstream file(path);
  if (!file) {
    return absl::InvalidArgumentError(absl::StrCat(field, ": cannot read \"", path, "\""));
  }
  std::stringstream contents;
  contents << file.rdbuf();
  if (!absl::StrContains(contents.str(), "-----BEGIN ")) {
    return absl::InvalidArgumentError(
        absl::StrCat(field, ": \"", path, "\" is not a PEM file (no -----BEGIN line)"));
  }
  return contents.str();
}

absl::StatusOr<NodeTlsMaterial> ReadTls(const NodeTls& tls, const std::string& where) {
  NodeTlsMaterial material;
  if (tls.cert_file().empty() != tls.key_file().empty()) {
    return absl::InvalidArgumentError(absl::StrCat(
        where, ".cert_file and ", where, ".key_file: give both (a client certificate and its "
        "key) or neither"));
  }
  if (!tls.ca_file().empty()) {
    ASSIGN_OR_RETURN(material.ca_pem, ReadPemFile(tls.ca_file(), where + ".ca_file"));
  }
  if (!tls.cert_file().empty()) {
    ASSIGN_OR_RETURN(material.cert_pem, ReadPemFile(tls.cert_file(), where + ".cert_file"));
    ASSIGN_OR_RETURN(material.key_pem, ReadPemFile(tls.key_file(), where + ".key_file"));
  }
  material.server_name = tls.server_name();
  return material;
}

}  // namespace

absl::Status CheckNodeNames(const std::vector<DaemonNode>& nodes) {
  std::set<std::string> seen;
  for (const DaemonNode& node : nodes) {
    if (!ValidName(node.name)) {
      return absl::InvalidArgumentError(absl::StrCat("node name \"", node.name,
                                                     "\": use 1 to 63 of ", kNameRule));
    }
    if (!seen.insert(node.name).second) {
      return absl::InvalidArgumentError(
          absl::StrCat("node name \"", node.name, "\" is used twice; names must be unique"));
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<FleetConfig> ParseFleet(const std::string& text, const std::string& file_name) {
  FleetFile fleet;
  google::protobuf::TextFormat::Parser parser;
  std::string parse_errors;
  struct Collector : google::protobuf::io::ErrorCollector {
    std::string* out;
    void AddError(int line, int column, const std::string& message) override {
      absl::StrAppend(out, "line ", line + 1, ":", column + 1, ": ", message, "; ");
    }
  } collector;
  collector.out = &parse_errors;
  parser.RecordErrorsTo(&collector);
  if (!parser.ParseFromString(text, &fleet)) {
    return absl::InvalidArgumentError(
        absl::StrCat(file_name, ": not a fleet textproto: ", parse_errors,
                     "expected node { name: \"gpu-a\" address: \"gpu-a:7070\" } ..."));
  }
  FleetConfig config;
  if (fleet.node().empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat(file_name, ": no node { name: ... address: ... } entries"));
  }
  for (int i = 0; i < fleet.node_size(); ++i) {
    const FleetNode& entry = fleet.node(i);
    const std::string where = absl::StrCat(file_name, ": node[", i, "]");
    if (!ValidName(entry.name())) {
      return absl::InvalidArgumentError(absl::StrCat(where, ".name \"", entry.name(),
                                                     "\": use 1 to 63 of ", kNameRule));
    }
    if (entry.address().empty()) {
      return absl::InvalidArgumentError(
          absl::StrCat(where, ".address: empty; give host:port or unix:/path"));
    }
    DaemonNode node{entry.name(), entry.address(), std::nullopt};
    if (entry.has_tls()) {
      ASSIGN_OR_RETURN(node.tls, ReadTls(entry.tls(), where + ".tls"));
    }
    config.nodes.push_back(std::move(node));
  }
  if (absl::Status names = CheckNodeNames(config.nodes); !names.ok()) {
    return absl::InvalidArgumentError(absl::StrCat(file_name, ": ", names.message()));
  }
  if (!fleet.node_timeout().empty()) {
    absl::Duration timeout;
    if (!absl::ParseDuration(fleet.node_timeout(), &timeout) || timeout <= absl::ZeroDuration()) {
      return absl::InvalidArgumentError(absl::StrCat(file_name, ": node_timeout \"",
                                                     fleet.node_timeout(),
                                                     "\": a positive duration such as 10s"));
    }
    config.node_timeout = timeout;
  }
  return config;
}

absl::StatusOr<FleetConfig> LoadFleetFile(const std::string& path) {
  std::ifstream file(path);
  if (!file) {
    return absl::NotFoundError(absl::StrCat("fleet file \"", path,
                                            "\" cannot be read; see docs/deploy.md for its form"));
  }
  std::stringstream contents;
  contents << file.rdbuf();
  return ParseFleet(contents.str(), path);
}

absl::StatusOr<DaemonNode> ParseTargetFlag(absl::string_view value) {
  if (value.empty()) {
    return absl::InvalidArgumentError("--target: empty; give ADDR or NAME=ADDR");
  }
  const size_t equals = value.find('=');
  // "unix:/x=y" or "[::1]:7070" are addresses: a name never holds ':' or '/'.
  if (equals != absl::string_view::npos &&
      value.substr(0, equals).find_first_of(":/[") == absl::string_view::npos) {
    DaemonNode node{std::string(value.substr(0, equals)), std::string(value.substr(equals + 1)),
                    std::nullopt};
    if (!ValidName(node.name)) {
      return absl::InvalidArgumentError(absl::StrCat("--target ", value, ": name \"", node.name,
                                                     "\" must use ", kNameRule));
    }
    if (node.address.empty()) {
      return absl::InvalidArgumentError(absl::StrCat("--target ", value, ": no address after '='"));
    }
    return node;
  }
  // Named after the address, made a valid name: "unix:/tmp/a.sock" -> "unix_tmp_a.sock".
  std::string name;
  for (char c : value) {
    const bool keep = absl::ascii_isalnum(static_cast<unsigned char>(c)) || c == '.' || c == '-';
    if (keep) {
      name.push_back(c);
    } else if (!name.empty() && name.back() != '_') {
      name.push_back('_');
    }
  }
  if (name.size() > 63) name = name.substr(name.size() - 63);
  return DaemonNode{name, std::string(value), std::nullopt};
}

absl::StatusOr<std::vector<DaemonNode>> SelectNodes(const std::vector<DaemonNode>& nodes,
                                                    absl::string_view names) {
  std::set<std::string> wanted;
  for (absl::string_view name : absl::StrSplit(names, ',', absl::SkipWhitespace())) {
    wanted.insert(std::string(absl::StripAsciiWhitespace(name)));
  }
  std::vector<std::string> known;
  for (const DaemonNode& node : nodes) known.push_back(node.name);
  for (const std::string& name : wanted) {
    if (std::find(known.begin(), known.end(), name) == known.end()) {
      return absl::InvalidArgumentError(absl::StrCat("--node ", name, ": no such node; the fleet has ",
                                                     absl::StrJoin(known, ", ")));
    }
  }
  std::vector<DaemonNode> selected;
  for (const DaemonNode& node : nodes) {
    if (wanted.contains(node.name)) selected.push_back(node);
  }
  return selected;
}

QualifiedId SplitQualifiedId(absl::string_view text) {
  const size_t slash = text.find('/');
  if (slash == absl::string_view::npos) return {"", std::string(text)};
  return {std::string(text.substr(0, slash)), std::string(text.substr(slash + 1))};
}

}  // namespace gpuprof::client
