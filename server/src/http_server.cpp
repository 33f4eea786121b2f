// HttpServer (zoo/server/http_server.hpp): Beast parses requests (limits, malformed input) and
// serializes responses and chunks; one io_context thread owns every connection, and a Responder
// carries calls from other threads onto it with net::post.
#include "zoo/server/http_server.hpp"

#include <fmt/format.h>

#include <array>
#include <atomic>
#include <utility>  // before Asio: its awaitable.hpp uses std::exchange without it

#include <boost/asio.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <deque>
#include <vector>
#include <optional>
#include <sstream>

#include "zoo/error.hpp"
#include "zoo/format.hpp"

namespace zoo::server {

namespace beast = boost::beast;
namespace http = beast::http;
namespace net = boost::asio;
using tcp = net::ip::tcp;

namespace {
class Connection;
}  // namespace

struct HttpServer::State {
  net::io_context io{1};
  // run() returns when nothing is pending; once the acceptor is closed (draining), a connection
  // whose answer is being made elsewhere has nothing pending either, and what the engine posts for
  // it would wait forever. stop() ends run().
  net::executor_work_guard<net::io_context::executor_type> busy{io.get_executor()};
  tcp::acceptor acceptor{io};
  Handler handler;
  HttpOptions options;
  std::atomic<std::size_t> connections{0}, answering{0};
  std::vector<std::weak_ptr<Connection>> live;  // I/O thread only: what close_all() closes
  net::steady_timer accept_pause{io};           // accept() failing (descriptors out): wait, then retry
  bool accept_failing = false;                  // logged once until an accept succeeds again
  bool closed = false;
};

namespace {

std::string lower(std::string s) {
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

class Connection : public std::enable_shared_from_this<Connection> {
 public:
  Connection(tcp::socket socket, std::shared_ptr<HttpServer::State> state)
      : state_(std::move(state)), stream_(std::move(socket)) {
    ++state_->connections;
  }
  ~Connection() {
    set_answering(false);
    --state_->connections;
  }

  void start() { read_header(); }
  // Closes the socket without telling the owner (the server is going; its handler may be gone).
  void shut() {
    disconnect_ = nullptr;
    close();
  }

  // ---- what the Responder does, on the I/O thread ----
  void reply(int status, const std::string& type, std::string body,
             const std::vector<std::pair<std::string, std::string>>& headers) {
    if (answered_ || closed_) return;
    answered_ = true;
    http::response<http::string_body> res{static_cast<http::status>(status), 11};
    res.set(http::field::server, "zoo");
    res.set(http::field::content_type, type);
    for (const auto& [name, value] : headers) res.set(name, value);
    res.keep_alive(keep_alive_);
    res.body() = std::move(body);
    res.prepare_payload();
    std::ostringstream out;
    // HEAD: the headers GET would have (its Content-Length too), and no body, which a kept-alive
    // client would read as the start of the next response.
    if (head_) out << res.base();
    else out << res;
    enqueue(out.str(), true);
  }
  void begin_stream(int status, const std::string& type,
                    const std::vector<std::pair<std::string, std::string>>& headers) {
    if (answered_ || closed_) return;
    answered_ = streaming_ = true;
    http::response<http::empty_body> res{static_cast<http::status>(status), 11};
    res.set(http::field::server, "zoo");
    res.set(http::field::content_type, type);
    res.set(http::field::cache_control, "no-cache");
    for (const auto& [name, value] : headers) res.set(name, value);
    res.keep_alive(keep_alive_);
    res.chunked(true);
    std::ostringstream out;
    out << res.base();
    enqueue(out.str(), false);
  }
  void write_chunk(const std::string& data) {
    if (!streaming_ || closed_ || data.empty()) return;
    if (pending_bytes_ + data.size() > state_->options.max_pending_bytes) {
      fmt::print(stderr, "zoo serve: dropping a client that does not read its stream ({} unsent)\n",
                 format_bytes(pending_bytes_));
      return close();
    }
    enqueue(beast::buffers_to_string(http::make_chunk(net::const_buffer(data.data(), data.size()))), false);
  }
  void end_stream() {
    if (!streaming_ || closed_) return;
    streaming_ = false;
    enqueue(beast::buffers_to_string(http::make_chunk_last()), true);
  }
  void on_disconnect(std::function<void()> callback) {
    if (closed_) {
      if (callback) callback();
      return;
    }
    disconnect_ = std::move(callback);
  }

 private:
  void read_header() {
    answered_ = streaming_ = head_ = false;
    parser_.emplace();
    parser_->header_limit(static_cast<std::uint32_t>(state_->options.max_header_bytes));
    parser_->body_limit(state_->options.max_body_bytes);
    stream_.expires_after(state_->options.idle_timeout);
    http::async_read_header(stream_, buffer_, *parser_,
                            [self = shared_from_this()](beast::error_code ec, std::size_t) { self->on_header(ec); });
  }
  void on_header(beast::error_code ec) {
    if (ec) return fail_read(ec);
    keep_alive_ = parser_->keep_alive();
    head_ = parser_->get().method() == http::verb::head;
    if (state_->options.head_check) {
      HttpRequest head = request_of(parser_->get());
      if (auto refusal = state_->options.head_check(head)) {
        keep_alive_ = false;  // the body is left unread
        unread_body_ = true;
        set_answering(true);
        return reply(refusal->status, refusal->content_type, std::move(refusal->body), {});
      }
    }
    // curl and others wait for this before sending a large body.
    if (lower(std::string(parser_->get()[http::field::expect])) == "100-continue") {
      enqueue("HTTP/1.1 100 Continue\r\n\r\n", false);
    }
    http::async_read(stream_, buffer_, *parser_,
                     [self = shared_from_this()](beast::error_code ec, std::size_t) { self->on_body(ec); });
  }
  void on_body(beast::error_code ec) {
    if (ec) return fail_read(ec);
    stream_.expires_never();  // a generation may take long; the handler bounds it
    auto& msg = parser_->get();
    HttpRequest request = request_of(msg);
    request.body = std::move(msg.body());
    set_answering(true);
    state_->handler(std::move(request), make_responder());
  }
  template <class Message>
  static HttpRequest request_of(const Message& msg) {
    HttpRequest request;
    request.method = std::string(msg.method_string());
    request.target = std::string(msg.target());
    request.path = request.target.substr(0, request.target.find('?'));
    for (const auto& field : msg) request.headers[lower(std::string(field.name_string()))] = std::string(field.value());
    return request;
  }
  void set_answering(bool on) {
    if (on == answering_) return;
    answering_ = on;
    if (on) ++state_->answering;
    else --state_->answering;
  }
  void fail_read(beast::error_code ec) {
    keep_alive_ = false;
    unread_body_ = true;  // what the client still sends is read and dropped before the close
    if (ec == http::error::body_limit) {
      reply(413, "application/json", error_body("the request body is larger than the limit", "body_too_large"), {});
    } else if (ec == http::error::header_limit || ec == http::error::buffer_overflow) {
      // buffer_overflow: chunked trailers past the read buffer (header_limit does not cover them).
      reply(431, "application/json",
            error_body("the request headers (or chunked trailers) are larger than the limit", "headers_too_large"),
            {});
    } else if (ec.category() == http::make_error_code(http::error::bad_method).category() &&
               ec != http::error::end_of_stream && ec != http::error::partial_message) {
      reply(400, "application/json", error_body("malformed HTTP request: " + ec.message(), "bad_request"), {});
    } else {
      close();  // end of stream, timeout, reset: nothing to answer
    }
  }
  static std::string error_body(const std::string& message, const char* code) {
    return fmt::format(R"({{"error":{{"message":"{}","type":"invalid_request_error","param":null,"code":"{}"}}}})",
                       message, code);
  }

  std::shared_ptr<Responder> make_responder();

  void enqueue(std::string bytes, bool last) {
    pending_bytes_ += bytes.size();
    out_.push_back({std::move(bytes), last});
    if (out_.size() == 1) write_next();
  }
  void write_next() {
    net::async_write(stream_, net::buffer(out_.front().bytes),
                     [self = shared_from_this()](beast::error_code ec, std::size_t) { self->on_write(ec); });
  }
  void on_write(beast::error_code ec) {
    // Closed meanwhile (a client dropped for not reading): out_ is gone, whatever the write did.
    if (ec || closed_) return close();
    const bool last = out_.front().last;
    pending_bytes_ -= out_.front().bytes.size();
    out_.pop_front();
    if (last) {
      out_.clear();
      pending_bytes_ = 0;
      disconnect_ = nullptr;  // answered in full
      set_answering(false);
      if (!keep_alive_) {
        beast::error_code ignored;
        stream_.socket().shutdown(tcp::socket::shutdown_send, ignored);
        return unread_body_ ? discard_then_close(0) : close();
      }
      read_header();
      return;
    }
    if (!out_.empty()) write_next();
  }
  // After answering a request whose body was not read: reads and drops what the client still sends
  // (a bounded amount, for a bounded time) before closing, as closing a socket with unread input
  // resets it, and the client could lose the answer.
  void discard_then_close(std::size_t discarded) {
    if (discarded > (1u << 20)) return close();
    stream_.expires_after(std::chrono::seconds(2));
    stream_.async_read_some(net::buffer(scratch_), [self = shared_from_this(), discarded](beast::error_code ec,
                                                                                          std::size_t n) {
      if (ec) return self->close();
      self->discard_then_close(discarded + n);
    });
  }
  void close() {
    if (closed_) return;
    closed_ = true;
    out_.clear();
    pending_bytes_ = 0;
    set_answering(false);
    beast::error_code ignored;
    stream_.socket().close(ignored);
    if (disconnect_) {  // gone before its answer ended
      auto callback = std::move(disconnect_);
      disconnect_ = nullptr;
      callback();
    }
  }

  struct Pending {
    std::string bytes;
    bool last;  // the end of an answer
  };
  std::shared_ptr<HttpServer::State> state_;
  beast::tcp_stream stream_;
  // Capped: Beast bounds a request's headers by header_limit but buffers chunked trailers whole,
  // and a trailer field past 64 KiB would throw from inside the parser.
  beast::flat_buffer buffer_{state_->options.max_header_bytes + 4096};
  std::optional<http::request_parser<http::string_body>> parser_;
  std::deque<Pending> out_;
  std::function<void()> disconnect_;
  std::size_t pending_bytes_ = 0;  // in out_
  std::array<char, 4096> scratch_{};
  bool unread_body_ = false;
  bool keep_alive_ = true, answered_ = false, streaming_ = false, closed_ = false, head_ = false, answering_ = false;
};

// Carries each call onto the I/O thread, in order. It owns the connection while the handler may still answer
// (nothing else does once the request is read); a call after the connection closed does nothing.
class PostingResponder : public Responder {
 public:
  PostingResponder(std::shared_ptr<Connection> connection, net::io_context& io)
      : connection_(std::move(connection)), io_(io) {}
  void reply(int status, std::string type, std::string body,
             std::vector<std::pair<std::string, std::string>> headers) override {
    post([=, body = std::move(body)](Connection& c) mutable { c.reply(status, type, std::move(body), headers); });
  }
  void begin_stream(int status, std::string type, std::vector<std::pair<std::string, std::string>> headers) override {
    post([=](Connection& c) { c.begin_stream(status, type, headers); });
  }
  void write(std::string chunk) override {
    post([chunk = std::move(chunk)](Connection& c) { c.write_chunk(chunk); });
  }
  void end() override {
    post([](Connection& c) { c.end_stream(); });
  }
  void on_disconnect(std::function<void()> callback) override {
    post([callback = std::move(callback)](Connection& c) mutable { c.on_disconnect(std::move(callback)); });
  }
  void run(std::function<void()> work) override {
    post([work = std::move(work)](Connection&) { work(); });
  }

 private:
  template <class F>
  void post(F f) {
    // Dispatch, not post: on the I/O thread (a handler answering at once) it runs now, so it is
    // ordered before anything the engine thread posts after it. Asio queues a post made inside a
    // running handler privately until that handler returns, behind posts from other threads: a
    // stream's first chunk could then overtake its headers.
    net::dispatch(io_, [c = connection_, f = std::move(f)]() mutable { f(*c); });
  }
  std::shared_ptr<Connection> connection_;
  net::io_context& io_;
};

std::shared_ptr<Responder> Connection::make_responder() {
  return std::make_shared<PostingResponder>(shared_from_this(), state_->io);
}

void accept_next(const std::shared_ptr<HttpServer::State>& state) {
  state->acceptor.async_accept(net::make_strand(state->io), [state](beast::error_code ec, tcp::socket socket) {
    if (ec == net::error::operation_aborted || !state->acceptor.is_open()) return;
    if (ec) {
      // Out of descriptors (EMFILE, ENFILE) or memory: the connection stays in the backlog, so an
      // accept re-armed at once fails at once, a core spinning. Retry after a pause; say so once.
      if (!state->accept_failing)
        fmt::print(stderr, "zoo serve: cannot accept connections ({}); retrying every 100 ms\n", ec.message());
      state->accept_failing = true;
      state->accept_pause.expires_after(std::chrono::milliseconds(100));
      state->accept_pause.async_wait([state](beast::error_code wait_ec) {
        if (!wait_ec && state->acceptor.is_open()) accept_next(state);
      });
      return;
    }
    if (state->accept_failing) {
      state->accept_failing = false;
      fmt::print(stderr, "zoo serve: accepting connections again\n");
    }
    // A stream is many small writes (an event per token). With Nagle's algorithm each one waits
    // for the client's ACK of the one before, which the client may delay (40 ms on Linux), so
    // tokens would arrive in bursts; servers that stream (asyncio's transports, llama-server)
    // turn it off. Where the option cannot be set, the connection still works.
    beast::error_code ignored;
    socket.set_option(tcp::no_delay(true), ignored);
    auto connection = std::make_shared<Connection>(std::move(socket), state);
    std::erase_if(state->live, [](const auto& c) { return c.expired(); });
    state->live.push_back(connection);
    connection->start();
    accept_next(state);
  });
}

}  // namespace

HttpServer::HttpServer(const HttpOptions& options, Handler handler) : state_(std::make_shared<State>()) {
  state_->handler = std::move(handler);
  state_->options = options;
  beast::error_code ec;
  const auto address = net::ip::make_address(options.host, ec);
  if (ec) throw InputError(fmt::format("--host {}: not an IP address ({})", options.host, ec.message()));
  const tcp::endpoint endpoint{address, options.port};
  auto& acceptor = state_->acceptor;
  const auto check = [&](const char* what) {
    if (ec)
      throw InputError(fmt::format("cannot {} {}:{}: {}", what, options.host, options.port, ec.message()));
  };
  acceptor.open(endpoint.protocol(), ec);
  check("open a socket for");
  acceptor.set_option(net::socket_base::reuse_address(true), ec);
  check("set options on");
  acceptor.bind(endpoint, ec);
  check("bind");
  acceptor.listen(net::socket_base::max_listen_connections, ec);
  check("listen on");
  accept_next(state_);
}

HttpServer::~HttpServer() { close_all(); }

// Handlers still queued (the pending accept above all) hold the state, which holds the io_context
// that holds them: closing the acceptor and running what is left once lets them finish and the
// state go. The thread that ran run() has returned by now (the owner joins it first).
void HttpServer::close_all() {
  if (state_->closed) return;
  state_->closed = true;
  stop();
  beast::error_code ignored;
  state_->acceptor.close(ignored);
  state_->accept_pause.cancel();
  for (const auto& weak : state_->live)
    if (const auto connection = weak.lock()) connection->shut();
  state_->live.clear();
  state_->io.restart();
  try {
    state_->io.poll();
  } catch (const std::exception& e) {
    fmt::print(stderr, "zoo serve: while closing: {}\n", escape_text(e.what(), 300));
  }
}

std::uint16_t HttpServer::port() const {
  beast::error_code ec;
  const auto endpoint = state_->acceptor.local_endpoint(ec);
  return ec ? 0 : endpoint.port();
}

void HttpServer::run() {
  for (;;) {
    try {
      state_->io.run();
      return;
    } catch (const std::exception& e) {
      // The handler's connection went with the unwinding; the others are served on.
      fmt::print(stderr, "zoo serve: a connection failed: {}\n", escape_text(e.what(), 300));
    }
  }
}

void HttpServer::stop_accepting() {
  net::post(state_->io, [state = state_] {
    beast::error_code ignored;
    state->acceptor.close(ignored);
  });
}

void HttpServer::stop() { state_->io.stop(); }

std::size_t HttpServer::connections() const { return state_->connections.load(); }

std::size_t HttpServer::answering() const { return state_->answering.load(); }

}  // namespace zoo::server
