#pragma once
// A small HTTP/1.1 server over Boost.Beast and Asio (Boost comes with Zoo already): one I/O thread
// runs every connection asynchronously, so a streaming client holds no thread and hundreds can
// wait on tokens at once. Handlers answer whole responses or stream chunks (server-sent events);
// both may be answered from another thread (the engine's), which posts into the connection.
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace zoo::server {

struct HttpRequest {
  std::string method;  // "GET", "POST", ...
  std::string target;  // path and query as sent
  std::string path;    // target without the query
  std::map<std::string, std::string> headers;  // names lower-cased
  std::string body;
  std::string header(const std::string& lower_name) const {
    const auto it = headers.find(lower_name);
    return it == headers.end() ? std::string() : it->second;
  }
};

// How a handler answers one request, exactly once: reply(), or begin_stream() then any number of
// write() and one end(). Thread-safe: every call is carried to the connection's own thread.
class Responder {
 public:
  virtual ~Responder() = default;
  virtual void reply(int status, std::string content_type, std::string body,
                     std::vector<std::pair<std::string, std::string>> headers = {}) = 0;
  virtual void begin_stream(int status, std::string content_type,
                            std::vector<std::pair<std::string, std::string>> headers = {}) = 0;
  virtual void write(std::string chunk) = 0;
  virtual void end() = 0;
  // Called once, on the connection's thread, when the client goes away before the answer ended
  // (a failed write or a closed socket): a streaming handler cancels its work there.
  virtual void on_disconnect(std::function<void()> callback) = 0;
  // Runs `work` on the connection's thread, in order with the calls above (a handler's own work
  // that should not hold up the thread it was called on).
  virtual void run(std::function<void()> work) = 0;
};

using Handler = std::function<void(HttpRequest request, std::shared_ptr<Responder> responder)>;

// An answer a HeadCheck gives instead of reading the body.
struct HttpRefusal {
  int status = 400;
  std::string content_type, body;
};
// Called on the I/O thread with a request's method, target, path and headers (its body not read
// yet): a refusal is answered at once and the connection closes, so a client without the API key
// never has its body read (nor its chunked trailers parsed).
using HeadCheck = std::function<std::optional<HttpRefusal>(const HttpRequest& head)>;

struct HttpOptions {
  std::string host = "127.0.0.1";
  std::uint16_t port = 8000;  // 0: any free port (port() says which)
  std::size_t max_body_bytes = 8u << 20;    // larger: 413
  std::size_t max_header_bytes = 64u << 10;  // larger: 431
  std::chrono::seconds idle_timeout{120};    // a connection with no request in flight for this long closes
  // Bytes of an answer waiting for a client that reads slower than the server writes (a stream
  // whose client stopped reading): past this the connection is dropped, and its request cancelled
  // through on_disconnect, so a stalled client holds a bounded buffer.
  std::size_t max_pending_bytes = 32u << 20;
  HeadCheck head_check;  // empty: every request's body is read
};

class HttpServer {
 public:
  // Binds and listens at once (InputError naming the address when it cannot); serves once run().
  HttpServer(const HttpOptions& options, Handler handler);
  ~HttpServer();
  HttpServer(const HttpServer&) = delete;
  HttpServer& operator=(const HttpServer&) = delete;

  std::uint16_t port() const;
  // Serves on the calling thread until stop(). An exception that escapes a handler is logged and
  // serving goes on (the connection it came from is dropped).
  void run();
  // Stops accepting; connections with an answer in flight finish it, then close. From any thread.
  void stop_accepting();
  // Ends run() now, closing every connection. From any thread.
  void stop();
  // After run() returned: closes every connection and runs the handlers still queued on this
  // thread, now, while what they reach (the handler's owner) still lives. Idempotent.
  void close_all();
  // Connections open now.
  std::size_t connections() const;
  // Requests read whose answer is not yet written in full (handed to the kernel) nor abandoned.
  std::size_t answering() const;

  struct State;  // opaque: the connections share it

 private:
  std::shared_ptr<State> state_;
};

}  // namespace zoo::server
