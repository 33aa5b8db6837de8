// Deterministic synthetic request stream with the prefix sharing an LLM
// serving engine sees: many requests share one of a few system prompts, and
// each user's requests extend that user's own conversation history.

#ifndef GPUPROF_RADIX_REQUEST_STREAM_H_
#define GPUPROF_RADIX_REQUEST_STREAM_H_

#include <cstdint>
#include <random>
#include <string>
#include <string_view>
#include <vector>

namespace gpuprof::radix {

struct RequestStreamConfig {
  // Same seed and config, same stream, on every platform.
  uint64_t seed = 1;
  int64_t num_requests = 2000;
  int64_t num_system_prompts = 8;
  int64_t system_prompt_tokens = 512;
  int64_t num_users = 64;
  // Each request ends in a fresh random tail of a length drawn uniformly from
  // [min_tail_tokens, max_tail_tokens].
  int64_t min_tail_tokens = 16;
  int64_t max_tail_tokens = 256;
  // Chance that a request's tail becomes part of its user's history (the turn
  // is kept in the conversation), so the user's next request repeats it.
  double history_growth_probability = 0.75;
  // A conversation whose history would grow past this starts over with an
  // empty history, as a user opening a new chat does.
  int64_t max_history_tokens = 8192;
  // Tokens are drawn uniformly from [0, vocab_size).
  int64_t vocab_size = 32000;
};

// Limits enforced by ValidateRequestStreamConfig.
inline constexpr int64_t kMaxRequests = 10'000'000;
inline constexpr int64_t kMaxRequestTokens = int64_t{1} << 20;
inline constexpr int64_t kMaxSystemPrompts = 65'536;
inline constexpr int64_t kMaxUsers = 1'000'000;
inline constexpr int64_t kMaxVocabSize = (int64_t{1} << 31) - 1;
// Bounds the generator's own memory: system prompts plus the longest
// possible user histories, in tokens (1 GiB of int32).
inline constexpr int64_t kMaxStreamStateTokens = int64_t{1} << 28;

// Returns an empty string if `config` is valid, else a message naming the
// first bad field, its value and the allowed range, e.g.
// "num_users: got 0; must be in [1, 1000000]". `field_prefix` is prepended to
// field names so an enclosing config can say where the field lives.
std::string ValidateRequestStreamConfig(const RequestStreamConfig& config,
                                        const std::string& field_prefix = "");

// "<field>: got <value>; must be in [<min>, <max>]" if value is outside
// [min, max], else empty. Shared by this package's config validators so every
// message has the same shape.
std::string OutOfRangeMessage(std::string_view field, int64_t value, int64_t min, int64_t max);

struct Request {
  int64_t user_id = 0;
  int64_t system_prompt_id = 0;
  // Length of the system prompt plus the user's history: the part of
  // `tokens` that an earlier request of this user may already have sent.
  int64_t context_tokens = 0;
  std::vector<int32_t> tokens;
};

class RequestStream {
 public:
  // `config` must be valid (see ValidateRequestStreamConfig).
  explicit RequestStream(const RequestStreamConfig& config);

  // Fills `request` with the next request, reusing its buffer. Returns false,
  // leaving `request` untouched, once num_requests have been produced.
  bool Next(Request* request);

  int64_t produced() const { return produced_; }
  const RequestStreamConfig& config() const { return config_; }
  const std::vector<int32_t>& system_prompt(int64_t id) const {
    return system_prompts_[static_cast<size_t>(id)];
  }
  int64_t system_prompt_of_user(int64_t user_id) const {
    return users_[static_cast<size_t>(user_id)].system_prompt_id;
  }

 private:
  struct User {
    int64_t system_prompt_id = 0;
    std::vector<int32_t> history;
  };

  int32_t RandomToken();
  int64_t RandomInRange(int64_t low, int64_t high);

  RequestStreamConfig config_;
  std::mt19937_64 rng_;
  std::vector<std::vector<int32_t>> system_prompts_;
  std::vector<User> users_;
  int64_t produced_ = 0;
};

}  // namespace gpuprof::radix

#endif  // GPUPROF_RADIX_REQUEST_STREAM_H_
