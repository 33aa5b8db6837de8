#include "daemon/admission/access_policy.h"

#include <grp.h>
#include <openssl/sha.h>
#include <pwd.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <map>
#include <sstream>

#include "absl/strings/ascii.h"
#include "absl/strings/escaping.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "google/protobuf/io/tokenizer.h"
#include "google/protobuf/text_format.h"
#include "google/protobuf/util/time_util.h"

namespace gpuprof::daemon {
namespace {

using ::google::protobuf::util::TimeUtil;

class CollectErrors : public google::protobuf::io::ErrorCollector {
 public:
  explicit CollectErrors(std::string origin) : origin_(std::move(origin)) {}
  void AddError(int line, int column, const std::string& message) override {
    // The parser counts from 0.
    errors_.push_back(absl::StrCat(origin_, ":", line + 1, ":", column + 1, ": ", message));
  }
  void AddWarning(int line, int column, const std::string& message) override {
    AddError(line, column, message);
  }
  const std::vector<std::string>& errors() const { return errors_; }

 private:
  std::string origin_;
  std::vector<std::string> errors_;
};

// Within protobuf's Duration range, seconds and nanos of one sign.
bool IsValidDuration(const google::protobuf::Duration& duration) {
  constexpr int64_t kMaxSeconds = 315'576'000'000;
  if (duration.seconds() < -kMaxSeconds || duration.seconds() > kMaxSeconds) return false;
  if (duration.nanos() <= -1'000'000'000 || duration.nanos() >= 1'000'000'000) return false;
  return !(duration.seconds() > 0 && duration.nanos() < 0) &&
         !(duration.seconds() < 0 && duration.nanos() > 0);
}

void CheckName(const std::string& field, const std::string& value, absl::string_view what,
               std::vector<std::string>& errors) {
  if (value.empty()) {
    errors.push_back(absl::StrCat(field, ": must name a ", what));
    return;
  }
  if (std::any_of(value.begin(), value.end(),
                  [](char c) { return absl::ascii_isspace(c) || absl::ascii_iscntrl(c); })) {
    errors.push_back(absl::StrCat(field, ": got \"", absl::CEscape(value), "\"; a ", what,
                                  " name has no spaces or control characters"));
  }
}

// A user name as the policy may write it: a local account ("alice", "uid:1001"), a
// certificate subject ("tls:alice") or a token's user. Parentheses are reserved, so that the
// catch-all "(other)" of the metrics is nobody's name. With tls_subjects_are_local_users a
// certificate is never "tls:<subject>", so an admins or users entry of that form would name no
// one, unless a token's user has that name: `entry_of_no_one` asks for that check.
void CheckUserName(const std::string& field, const std::string& value,
                   const v1::AccessPolicy& policy, bool entry_of_no_one,
                   std::vector<std::string>& errors) {
  CheckName(field, value, "user", errors);
  if (value.find_first_of("()") != std::string::npos) {
    errors.push_back(absl::StrCat(field, ": got \"", absl::CEscape(value),
                                  "\"; a user name has no parentheses (\"", kOtherUsers,
                                  "\" stands for every user without a users entry)"));
  }
  constexpr absl::string_view kTlsPrefix = "tls:";
  if (!absl::StartsWith(value, kTlsPrefix)) return;
  const absl::string_view subject = absl::string_view(value).substr(kTlsPrefix.size());
  if (subject.empty()) {
    errors.push_back(absl::StrCat(field,
                                  ": got \"tls:\"; name the certificate subject after "
                                  "tls: (\"tls:alice\" for CN=alice)"));
    return;
  }
  if (!entry_of_no_one || !policy.tls_subjects_are_local_users()) return;
  const bool a_token_user =
      std::any_of(policy.tokens().begin(), policy.tokens().end(),
                  [&](const v1::BearerToken& token) { return token.user() == value; });
  if (!a_token_user) {
    errors.push_back(absl::StrCat(
        field, ": got \"", absl::CEscape(value),
        "\", which names no one: with tls_subjects_are_local_users: true a certificate's "
        "subject is the local user of the same name; write \"",
        absl::CEscape(subject), "\""));
  }
}

// The first and last fields written in the text: `policy_version` must open the policy and
// `end_of_policy` close it. A textproto cut at a line break still parses, so the closing field
// is what shows that the file was read to its end.
void CheckHeaderAndEnd(const v1::AccessPolicy& policy,
                       const google::protobuf::TextFormat::ParseInfoTree& tree,
                       std::vector<std::string>& errors) {
  using Location = google::protobuf::TextFormat::ParseLocation;
  struct Seen {
    const google::protobuf::FieldDescriptor* field;
    Location start;
  };
  const auto before = [](const Location& a, const Location& b) {
    return a.line < b.line || (a.line == b.line && a.column < b.column);
  };
  const google::protobuf::Descriptor* descriptor = policy.GetDescriptor();
  const google::protobuf::Reflection* reflection = policy.GetReflection();
  std::vector<Seen> seen;
  for (int i = 0; i < descriptor->field_count(); ++i) {
    const google::protobuf::FieldDescriptor* field = descriptor->field(i);
    const int count = field->is_repeated() ? reflection->FieldSize(policy, field) : 1;
    for (int index = 0; index < count; ++index) {
      const Location start = tree.GetLocation(field, field->is_repeated() ? index : -1);
      if (start.line >= 0) seen.push_back({field, start});
    }
  }
  if (seen.empty()) return;  // the missing fields are named by validation
  // A top-level field that starts after another also ends after it: starts order them.
  const auto by_start = [&](const Seen& a, const Seen& b) { return before(a.start, b.start); };
  const auto first = std::min_element(seen.begin(), seen.end(), by_start);
  const auto last = std::max_element(seen.begin(), seen.end(), by_start);
  // Lines as an editor counts them (the parser counts from 0).
  if (policy.has_policy_version() && first->field->name() != "policy_version") {
    errors.push_back(absl::StrCat("policy_version: must be the first field; line ",
                                  first->start.line + 1, " sets ", first->field->name(),
                                  " before it"));
  }
  if (policy.has_end_of_policy() && last->field->name() != "end_of_policy") {
    errors.push_back(absl::StrCat("end_of_policy: must be the last field; line ",
                                  last->start.line + 1, " sets ", last->field->name(),
                                  " after it"));
  }
}

void CheckQuota(const std::string& field, const v1::Quota& quota,
                std::vector<std::string>& errors) {
  if (quota.has_max_queued_experiments() && quota.max_queued_experiments() < 0) {
    errors.push_back(absl::StrCat(field, ".max_queued_experiments: got ",
                                  quota.max_queued_experiments(), "; must be >= 0"));
  }
  if (quota.has_max_concurrent_gpus() && quota.max_concurrent_gpus() < 0) {
    errors.push_back(absl::StrCat(field, ".max_concurrent_gpus: got ", quota.max_concurrent_gpus(),
                                  "; must be >= 0"));
  }
  if (quota.has_max_gpu_hours_per_day() &&
      (!std::isfinite(quota.max_gpu_hours_per_day()) || quota.max_gpu_hours_per_day() < 0)) {
    errors.push_back(absl::StrCat(field, ".max_gpu_hours_per_day: got ",
                                  quota.max_gpu_hours_per_day(), "; must be a finite number >= 0"));
  }
  if (quota.has_max_timeout()) {
    const auto& timeout = quota.max_timeout();
    if (!IsValidDuration(timeout) || timeout.seconds() < 0 || timeout.nanos() < 0 ||
        (timeout.seconds() == 0 && timeout.nanos() == 0)) {
      errors.push_back(absl::StrCat(field, ".max_timeout: got ", TimeUtil::ToString(timeout),
                                    "; must be a positive duration"));
    }
  }
}

// The user's limits, field by field: later layers replace earlier ones where they set a field.
void Overlay(const v1::Quota& layer, v1::Quota& into) { into.MergeFrom(layer); }

}  // namespace

absl::StatusOr<v1::AccessPolicy> ParseAccessPolicy(const std::string& text,
                                                   const std::string& origin) {
  v1::AccessPolicy policy;
  CollectErrors errors(origin);
  google::protobuf::TextFormat::Parser parser;
  google::protobuf::TextFormat::ParseInfoTree locations;
  parser.RecordErrorsTo(&errors);
  parser.WriteLocationsTo(&locations);
  if (!parser.ParseFromString(text, &policy)) {
    return absl::InvalidArgumentError(errors.errors().empty()
                                          ? absl::StrCat(origin, ": not a gpuprof.v1.AccessPolicy")
                                          : absl::StrJoin(errors.errors(), "; "));
  }
  if (policy.ByteSizeLong() == 0 && !policy.has_policy_version()) {
    return absl::InvalidArgumentError(absl::StrCat(
        origin, ": empty (no field set); a policy file holds at least \"policy_version: ",
        kSupportedPolicyVersion,
        "\" as its first line and \"end_of_policy: true\" as its last (without --policy the "
        "daemon runs the built-in policy)"));
  }
  std::vector<std::string> problems;
  CheckHeaderAndEnd(policy, locations, problems);
  if (const absl::Status valid = ValidateAccessPolicy(policy); !valid.ok()) {
    problems.push_back(std::string(valid.message()));
  }
  if (!problems.empty()) {
    return absl::InvalidArgumentError(absl::StrCat(origin, ": ", absl::StrJoin(problems, "; ")));
  }
  return policy;
}

absl::StatusOr<v1::AccessPolicy> LoadAccessPolicyFile(const std::string& path) {
  std::ifstream file(path);
  if (!file) {
    return absl::NotFoundError(absl::StrCat("policy file ", path, ": cannot be read"));
  }
  std::stringstream text;
  text << file.rdbuf();
  return ParseAccessPolicy(text.str(), path);
}

absl::Status ValidateAccessPolicy(const v1::AccessPolicy& policy) {
  std::vector<std::string> errors;
  if (!policy.has_policy_version()) {
    errors.push_back(
        absl::StrCat("policy_version: missing; a policy's first line is "
                     "\"policy_version: ",
                     kSupportedPolicyVersion, "\""));
  } else if (policy.policy_version() != kSupportedPolicyVersion) {
    errors.push_back(absl::StrCat("policy_version: got ", policy.policy_version(),
                                  "; this gpuprofd reads version ", kSupportedPolicyVersion));
  }
  if (!policy.has_end_of_policy()) {
    errors.push_back(
        "end_of_policy: missing; a policy's last line is \"end_of_policy: true\", and a file "
        "without it is taken to be cut short");
  } else if (!policy.end_of_policy()) {
    errors.push_back("end_of_policy: got false; must be true");
  }
  for (int i = 0; i < policy.admins_size(); ++i) {
    CheckUserName(absl::StrCat("admins[", i, "]"), policy.admins(i), policy,
                  /*entry_of_no_one=*/true, errors);
  }
  for (int i = 0; i < policy.admin_groups_size(); ++i) {
    CheckName(absl::StrCat("admin_groups[", i, "]"), policy.admin_groups(i), "group", errors);
  }
  CheckQuota("default_quota", policy.default_quota(), errors);
  std::map<std::string, int> seen_users;
  for (int i = 0; i < policy.users_size(); ++i) {
    const std::string field = absl::StrCat("users[", i, "]");
    CheckUserName(field + ".user", policy.users(i).user(), policy, /*entry_of_no_one=*/true,
                  errors);
    const auto [it, inserted] = seen_users.emplace(policy.users(i).user(), i);
    if (!inserted && !policy.users(i).user().empty()) {
      errors.push_back(absl::StrCat(field, ".user: \"", policy.users(i).user(),
                                    "\" is listed twice (also users[", it->second, "])"));
    }
    CheckQuota(field + ".quota", policy.users(i).quota(), errors);
  }
  std::map<std::string, int> seen_groups;
  for (int i = 0; i < policy.groups_size(); ++i) {
    const std::string field = absl::StrCat("groups[", i, "]");
    CheckName(field + ".group", policy.groups(i).group(), "group", errors);
    const auto [it, inserted] = seen_groups.emplace(policy.groups(i).group(), i);
    if (!inserted && !policy.groups(i).group().empty()) {
      errors.push_back(absl::StrCat(field, ".group: \"", policy.groups(i).group(),
                                    "\" is listed twice (also groups[", it->second, "])"));
    }
    CheckQuota(field + ".quota", policy.groups(i).quota(), errors);
  }
  for (int i = 0; i < policy.custom_kernel_users_size(); ++i) {
    CheckUserName(absl::StrCat("custom_kernel_users[", i, "]"), policy.custom_kernel_users(i),
                  policy, /*entry_of_no_one=*/true, errors);
  }
  for (int i = 0; i < policy.custom_kernel_groups_size(); ++i) {
    CheckName(absl::StrCat("custom_kernel_groups[", i, "]"), policy.custom_kernel_groups(i),
              "group", errors);
  }
  for (int i = 0; i < policy.capture_users_size(); ++i) {
    CheckUserName(absl::StrCat("capture_users[", i, "]"), policy.capture_users(i), policy,
                  /*entry_of_no_one=*/true, errors);
  }
  for (int i = 0; i < policy.capture_groups_size(); ++i) {
    CheckName(absl::StrCat("capture_groups[", i, "]"), policy.capture_groups(i), "group", errors);
  }
  std::map<std::string, int> seen_hashes;
  for (int i = 0; i < policy.tokens_size(); ++i) {
    const std::string field = absl::StrCat("tokens[", i, "]");
    const auto& token = policy.tokens(i);
    CheckUserName(field + ".user", token.user(), policy, /*entry_of_no_one=*/false, errors);
    const bool hex = token.sha256().size() == 64 &&
                     std::all_of(token.sha256().begin(), token.sha256().end(), [](char c) {
                       return absl::ascii_isdigit(c) || (c >= 'a' && c <= 'f');
                     });
    if (!hex) {
      errors.push_back(absl::StrCat(
          field, ".sha256: got \"", absl::CEscape(token.sha256().substr(0, 80)),
          "\"; must be the token's SHA-256 as 64 lower-case hex digits (gpuprof token-hash "
          "prints it), never the token itself"));
    } else {
      const auto [it, inserted] = seen_hashes.emplace(token.sha256(), i);
      if (!inserted) {
        errors.push_back(
            absl::StrCat(field, ".sha256: the same token as tokens[", it->second, "]"));
      }
    }
  }
  if (policy.preemption().min_preempting_priority() < 0) {
    errors.push_back(absl::StrCat("preemption.min_preempting_priority: got ",
                                  policy.preemption().min_preempting_priority(),
                                  "; must be >= 0 (0 turns preemption off)"));
  }
  const auto& grace = policy.preemption().grace_period();
  if (!IsValidDuration(grace) || grace.seconds() < 0 || grace.nanos() < 0) {
    errors.push_back(
        absl::StrCat("preemption.grace_period: got ", TimeUtil::ToString(grace), "; must be >= 0"));
  }
  if (errors.empty()) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrJoin(errors, "; "));
}

std::string Sha256Hex(absl::string_view data) {
  unsigned char digest[SHA256_DIGEST_LENGTH];
  SHA256(reinterpret_cast<const unsigned char*>(data.data()), data.size(), digest);
  std::string hex;
  for (unsigned char byte : digest) absl::StrAppendFormat(&hex, "%02x", byte);
  return hex;
}

std::vector<std::string> UnixGroupsOf(const std::string& user) {
  std::vector<std::string> names;
  passwd entry;
  passwd* found = nullptr;
  std::vector<char> buffer(16384);
  if (getpwnam_r(user.c_str(), &entry, buffer.data(), buffer.size(), &found) != 0 ||
      found == nullptr) {
    return names;
  }
  int count = 64;
  std::vector<gid_t> gids(count);
  if (getgrouplist(user.c_str(), found->pw_gid, gids.data(), &count) < 0) {
    gids.resize(count);
    if (getgrouplist(user.c_str(), found->pw_gid, gids.data(), &count) < 0) return names;
  }
  gids.resize(count);
  for (gid_t gid : gids) {
    group group_entry;
    group* group_found = nullptr;
    std::vector<char> group_buffer(65536);
    if (getgrgid_r(gid, &group_entry, group_buffer.data(), group_buffer.size(), &group_found) ==
            0 &&
        group_found != nullptr) {
      names.push_back(group_found->gr_name);
    }
  }
  return names;
}

CustomKernelDecision DecideCustomKernels(const v1::AccessPolicy& policy, const std::string& user,
                                         const std::vector<std::string>& groups, bool admin) {
  if (admin) return {true, "admin"};
  if (policy.custom_kernels_for_everyone()) return {true, "custom_kernels_for_everyone"};
  const auto& users = policy.custom_kernel_users();
  if (std::find(users.begin(), users.end(), user) != users.end()) {
    return {true, "listed in custom_kernel_users"};
  }
  for (const std::string& group : policy.custom_kernel_groups()) {
    if (std::find(groups.begin(), groups.end(), group) != groups.end()) {
      return {true, absl::StrCat("member of group ", group, " (custom_kernel_groups)")};
    }
  }
  return {false, ""};
}

CustomKernelDecision DecideCaptures(const v1::AccessPolicy& policy, const std::string& user,
                                    const std::vector<std::string>& groups, bool admin) {
  if (admin) return {true, "admin"};
  if (policy.captures_for_everyone()) return {true, "captures_for_everyone"};
  const auto& users = policy.capture_users();
  if (std::find(users.begin(), users.end(), user) != users.end()) {
    return {true, "listed in capture_users"};
  }
  for (const std::string& group : policy.capture_groups()) {
    if (std::find(groups.begin(), groups.end(), group) != groups.end()) {
      return {true, absl::StrCat("member of group ", group, " (capture_groups)")};
    }
  }
  return {false, ""};
}

AdminDecision DecideAdmin(const v1::AccessPolicy& policy, const std::string& user,
                          const std::vector<std::string>& groups, bool is_daemon_uid) {
  if (std::find(policy.admins().begin(), policy.admins().end(), user) != policy.admins().end()) {
    return {true, "listed in admins"};
  }
  for (const std::string& admin_group : policy.admin_groups()) {
    if (std::find(groups.begin(), groups.end(), admin_group) != groups.end()) {
      return {true, absl::StrCat("member of group ", admin_group)};
    }
  }
  const bool daemon_user_is_admin =
      !policy.has_daemon_user_is_admin() || policy.daemon_user_is_admin();
  if (is_daemon_uid && daemon_user_is_admin) return {true, "runs gpuprofd"};
  return {false, ""};
}

ResolvedQuota ResolveQuota(const v1::AccessPolicy& policy, const std::string& user,
                           const std::vector<std::string>& groups) {
  ResolvedQuota resolved{policy.default_quota(), "default_quota"};
  for (const v1::GroupQuota& group : policy.groups()) {
    if (std::find(groups.begin(), groups.end(), group.group()) != groups.end()) {
      Overlay(group.quota(), resolved.limits);
      resolved.source = absl::StrCat("group ", group.group());
      break;
    }
  }
  for (const v1::UserQuota& entry : policy.users()) {
    if (entry.user() == user) {
      Overlay(entry.quota(), resolved.limits);
      resolved.source = "users entry";
      break;
    }
  }
  return resolved;
}

absl::StatusOr<std::unique_ptr<AccessControl>> AccessControl::Create(std::string path) {
  v1::AccessPolicy policy;
  if (!path.empty()) {
    auto loaded = LoadAccessPolicyFile(path);
    if (!loaded.ok()) return loaded.status();
    policy = *std::move(loaded);
  }
  return std::unique_ptr<AccessControl>(new AccessControl(std::move(path), std::move(policy)));
}

AccessControl::AccessControl(std::string path, v1::AccessPolicy policy)
    : path_(std::move(path)),
      policy_(std::make_shared<const v1::AccessPolicy>(std::move(policy))) {}

absl::Status AccessControl::Reload() {
  if (path_.empty()) {
    return absl::FailedPreconditionError("no --policy file was given; nothing to reload");
  }
  auto loaded = LoadAccessPolicyFile(path_);
  if (!loaded.ok()) return loaded.status();
  absl::MutexLock lock(&mutex_);
  policy_ = std::make_shared<const v1::AccessPolicy>(*std::move(loaded));
  return absl::OkStatus();
}

std::shared_ptr<const v1::AccessPolicy> AccessControl::policy() const {
  absl::MutexLock lock(&mutex_);
  return policy_;
}

AdminDecision AccessControl::IsAdmin(const std::string& user,
                                     const std::vector<std::string>& groups,
                                     bool is_daemon_uid) const {
  return DecideAdmin(*policy(), user, groups, is_daemon_uid);
}

ResolvedQuota AccessControl::QuotaFor(const std::string& user,
                                      const std::vector<std::string>& groups) const {
  return ResolveQuota(*policy(), user, groups);
}

ResolvedQuota AccessControl::QuotaForUser(const std::string& user) const {
  const auto current = policy();
  return ResolveQuota(*current, user,
                      current->groups().empty() ? std::vector<std::string>() : UnixGroupsOf(user));
}

CustomKernelDecision AccessControl::CustomKernelsFor(const std::string& user, bool admin) const {
  const auto current = policy();
  return DecideCustomKernels(
      *current, user,
      current->custom_kernel_groups().empty() ? std::vector<std::string>() : UnixGroupsOf(user),
      admin);
}

CustomKernelDecision AccessControl::CapturesFor(const std::string& user, bool admin) const {
  const auto current = policy();
  return DecideCaptures(
      *current, user,
      current->capture_groups().empty() ? std::vector<std::string>() : UnixGroupsOf(user), admin);
}

bool AccessControl::TlsSubjectsAreLocalUsers() const {
  return policy()->tls_subjects_are_local_users();
}

std::optional<std::string> AccessControl::UserForToken(absl::string_view token) const {
  if (token.empty()) return std::nullopt;
  const std::string hash = Sha256Hex(token);
  const auto current = policy();
  for (const v1::BearerToken& entry : current->tokens()) {
    if (entry.sha256() == hash) return entry.user();
  }
  return std::nullopt;
}

}  // namespace gpuprof::daemon
