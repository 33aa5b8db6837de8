#include "radix/request_stream.h"

#include <algorithm>
#include <charconv>
#include <cstdint>
#include <string>
#include <string_view>
#include <system_error>
#include <vector>

namespace gpuprof::radix {

std::string OutOfRangeMessage(std::string_view field, int64_t value, int64_t min, int64_t max) {
  if (value >= min && value <= max) return "";
  // std::to_string, unlike a stream, ignores any global locale's digit grouping.
  return std::string(field) + ": got " + std::to_string(value) + "; must be in [" +
         std::to_string(min) + ", " + std::to_string(max) + "]";
}

std::string ValidateRequestStreamConfig(const RequestStreamConfig& config,
                                        const std::string& field_prefix) {
  // Each field's range may depend on fields checked before it, so the
  // message always names a range the other fields leave room for.
  const auto check = [&field_prefix](std::string_view field, int64_t value, int64_t min,
                                     int64_t max) {
    return OutOfRangeMessage(field_prefix + std::string(field), value, min, max);
  };
  if (std::string error = check("num_requests", config.num_requests, 1, kMaxRequests);
      !error.empty()) {
    return error;
  }
  if (std::string error =
          check("num_system_prompts", config.num_system_prompts, 1, kMaxSystemPrompts);
      !error.empty()) {
    return error;
  }
  // Leave room for at least one tail token, and keep all system prompts
  // within the generator's memory bound.
  const int64_t max_system_prompt_tokens =
      std::min(kMaxRequestTokens - 1, kMaxStreamStateTokens / config.num_system_prompts);
  if (std::string error =
          check("system_prompt_tokens", config.system_prompt_tokens, 0, max_system_prompt_tokens);
      !error.empty()) {
    return error;
  }
  if (std::string error = check("num_users", config.num_users, 1, kMaxUsers); !error.empty()) {
    return error;
  }
  const int64_t max_tail_room = kMaxRequestTokens - config.system_prompt_tokens;
  if (std::string error = check("min_tail_tokens", config.min_tail_tokens, 1, max_tail_room);
      !error.empty()) {
    return error;
  }
  if (std::string error =
          check("max_tail_tokens", config.max_tail_tokens, config.min_tail_tokens, max_tail_room);
      !error.empty()) {
    return error;
  }
  const int64_t system_prompt_state = config.num_system_prompts * config.system_prompt_tokens;
  const int64_t max_history_tokens =
      std::min(max_tail_room - config.max_tail_tokens,
               (kMaxStreamStateTokens - system_prompt_state) / config.num_users);
  if (std::string error =
          check("max_history_tokens", config.max_history_tokens, 0, max_history_tokens);
      !error.empty()) {
    return error;
  }
  // Written as a negated range test so NaN is rejected too.
  const double probability = config.history_growth_probability;
  if (!(probability >= 0.0 && probability <= 1.0)) {
    // Shortest round-trip form, locale-independent: "1.5", "-0.25", "nan".
    char formatted[32];
    const auto [end, status] = std::to_chars(formatted, formatted + sizeof(formatted), probability);
    const std::string value = status == std::errc() ? std::string(formatted, end) : "?";
    return field_prefix + "history_growth_probability: got " + value + "; must be in [0, 1]";
  }
  return check("vocab_size", config.vocab_size, 2, kMaxVocabSize);
}

RequestStream::RequestStream(const RequestStreamConfig& config)
    : config_(config), rng_(config.seed) {
  system_prompts_.resize(static_cast<size_t>(config_.num_system_prompts));
  for (std::vector<int32_t>& prompt : system_prompts_) {
    prompt.resize(static_cast<size_t>(config_.system_prompt_tokens));
    for (int32_t& token : prompt) token = RandomToken();
  }
  users_.resize(static_cast<size_t>(config_.num_users));
  for (User& user : users_) {
    user.system_prompt_id = RandomInRange(0, config_.num_system_prompts - 1);
  }
}

int64_t RequestStream::RandomInRange(int64_t low, int64_t high) {
  // std::uniform_int_distribution differs between standard libraries; this
  // rejection sampler is unbiased and gives the same stream everywhere.
  const uint64_t range = static_cast<uint64_t>(high - low) + 1;
  if (range == 0) return static_cast<int64_t>(rng_());  // The full 64 bits.
  // Reject the lowest (2^64 mod range) values so every residue is equally
  // likely.
  const uint64_t reject_below = (0 - range) % range;
  uint64_t draw = rng_();
  while (draw < reject_below) draw = rng_();
  return low + static_cast<int64_t>(draw % range);
}

int32_t RequestStream::RandomToken() {
  return static_cast<int32_t>(RandomInRange(0, config_.vocab_size - 1));
}

bool RequestStream::Next(Request* request) {
  if (produced_ >= config_.num_requests) return false;
  ++produced_;

  const int64_t user_id = RandomInRange(0, config_.num_users - 1);
  User& user = users_[static_cast<size_t>(user_id)];
  const std::vector<int32_t>& prompt = system_prompts_[static_cast<size_t>(user.system_prompt_id)];
  const int64_t tail_tokens = RandomInRange(config_.min_tail_tokens, config_.max_tail_tokens);

  request->user_id = user_id;
  request->system_prompt_id = user.system_prompt_id;
  request->context_tokens = static_cast<int64_t>(prompt.size() + user.history.size());
  std::vector<int32_t>& tokens = request->tokens;
  tokens.clear();
  tokens.reserve(static_cast<size_t>(request->context_tokens + tail_tokens));
  tokens.insert(tokens.end(), prompt.begin(), prompt.end());
  tokens.insert(tokens.end(), user.history.begin(), user.history.end());
  for (int64_t i = 0; i < tail_tokens; ++i) tokens.push_back(RandomToken());

  // 53 random bits give a uniform double in [0, 1), the same on every
  // platform (unlike std::bernoulli_distribution).
  const double draw = static_cast<double>(rng_() >> 11) * 0x1.0p-53;
  if (draw < config_.history_growth_probability) {
    if (static_cast<int64_t>(user.history.size()) + tail_tokens > config_.max_history_tokens) {
      user.history.clear();
    } else {
      user.history.insert(user.history.end(), tokens.end() - tail_tokens, tokens.end());
    }
  }
  return true;
}

}  // namespace gpuprof::radix
