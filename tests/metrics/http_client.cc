#include "tests/metrics/http_client.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "absl/cleanup/cleanup.h"
#include "absl/status/status.h"
#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"

namespace gpuprof::testing {
namespace {

sockaddr_in Loopback(int port) {
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_port = htons(static_cast<uint16_t>(port));
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  return address;
}

absl::Status Errno(absl::string_view what) {
  return absl::UnavailableError(absl::StrCat(what, ": ", std::strerror(errno)));
}

}  // namespace

absl::StatusOr<HttpResponse> HttpGet(int port, const std::string& path_and_query,
                                     absl::Duration timeout) {
  const int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return Errno("socket");
  absl::Cleanup close_socket = [fd] { close(fd); };
  const sockaddr_in address = Loopback(port);
  if (connect(fd, reinterpret_cast<const sockaddr*>(&address), sizeof(address)) != 0) {
    return Errno(absl::StrCat("connect to 127.0.0.1:", port));
  }
  // HTTP/1.0 with no keep-alive: the server sends a plain body and closes, no chunking.
  const std::string request =
      absl::StrCat("GET ", path_and_query, " HTTP/1.0\r\nHost: 127.0.0.1:", port,
                   "\r\nAccept: */*\r\nConnection: close\r\n\r\n");
  for (size_t sent = 0; sent < request.size();) {
    const ssize_t n = send(fd, request.data() + sent, request.size() - sent, MSG_NOSIGNAL);
    if (n < 0) return Errno("send");
    sent += static_cast<size_t>(n);
  }
  std::string raw;
  const absl::Time deadline = absl::Now() + timeout;
  char buffer[65536];
  while (true) {
    const absl::Duration left = deadline - absl::Now();
    if (left <= absl::ZeroDuration()) {
      return absl::DeadlineExceededError(absl::StrCat("GET ", path_and_query, " timed out"));
    }
    pollfd readable = {fd, POLLIN, 0};
    if (poll(&readable, 1, static_cast<int>(absl::ToInt64Milliseconds(left)) + 1) < 0) {
      return Errno("poll");
    }
    const ssize_t n = recv(fd, buffer, sizeof(buffer), 0);
    if (n < 0) {
      if (errno == EINTR || errno == EAGAIN) continue;
      return Errno("recv");
    }
    if (n == 0) break;
    raw.append(buffer, static_cast<size_t>(n));
  }

  const size_t header_end = raw.find("\r\n\r\n");
  if (header_end == std::string::npos) {
    return absl::DataLossError(absl::StrCat("no HTTP header in: ", raw.substr(0, 200)));
  }
  const std::string status_line = raw.substr(0, raw.find("\r\n"));
  const std::vector<std::string> fields = absl::StrSplit(status_line, ' ');
  HttpResponse response;
  if (fields.size() < 2 || !absl::SimpleAtoi(fields[1], &response.status_code)) {
    return absl::DataLossError(absl::StrCat("bad HTTP status line: ", status_line));
  }
  const std::string headers = absl::AsciiStrToLower(raw.substr(0, header_end));
  if (headers.find("transfer-encoding: chunked") != std::string::npos) {
    return absl::UnimplementedError("chunked response to an HTTP/1.0 request");
  }
  response.body = raw.substr(header_end + 4);
  return response;
}

std::string UrlEncode(absl::string_view text) {
  std::string encoded;
  for (const char c : text) {
    if (absl::ascii_isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '_' || c == '.' ||
        c == '~') {
      encoded.push_back(c);
    } else {
      absl::StrAppend(&encoded, "%", absl::Hex(static_cast<unsigned char>(c), absl::kZeroPad2));
    }
  }
  return encoded;
}

absl::StatusOr<int> PickFreeLoopbackPort() {
  const int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return Errno("socket");
  absl::Cleanup close_socket = [fd] { close(fd); };
  sockaddr_in address = Loopback(0);
  if (bind(fd, reinterpret_cast<const sockaddr*>(&address), sizeof(address)) != 0) {
    return Errno("bind");
  }
  socklen_t length = sizeof(address);
  if (getsockname(fd, reinterpret_cast<sockaddr*>(&address), &length) != 0) {
    return Errno("getsockname");
  }
  return static_cast<int>(ntohs(address.sin_port));
}

}  // namespace gpuprof::testing
