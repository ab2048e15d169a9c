#include "backend/kube/reflector.h"

#include <algorithm>
#include <future>
#include <random>
#include <thread>

namespace tessera::kube {
namespace {

using Clock = std::chrono::steady_clock;

// Sleeps `d`, waking early (in steps of at most 20 ms) when `stop` becomes true.
void sleep_unless_stopped(std::chrono::milliseconds d, const std::atomic<bool>& stop) {
  auto until = Clock::now() + d;
  while (!stop.load()) {
    auto now = Clock::now();
    if (now >= until) return;
    std::this_thread::sleep_for(
        std::min<Clock::duration>(until - now, std::chrono::milliseconds(20)));
  }
}

std::string rv_of(const nlohmann::json& object) {
  auto m = object.find("metadata");
  if (m == object.end() || !m->is_object()) return "";
  auto r = m->find("resourceVersion");
  if (r == m->end() || !r->is_string()) return "";
  return r->get<std::string>();
}

// The continue token of a list answer, read without building the list: a SAX pass that stops
// once the top-level "metadata" object is closed (the API server writes it before "items"; if
// it came after, the pass would read on to it).
class ContinueScanner {
 public:
  using json = nlohmann::json;
  bool null() { return true; }
  bool boolean(bool) { return true; }
  bool number_integer(json::number_integer_t) { return true; }
  bool number_unsigned(json::number_unsigned_t) { return true; }
  bool number_float(json::number_float_t, const json::string_t&) { return true; }
  bool binary(json::binary_t&) { return true; }
  bool string(json::string_t& v) {
    if (depth_ == 2 && in_meta_ && key_ == "continue") token = std::move(v);
    return true;
  }
  bool start_object(std::size_t) {
    ++depth_;
    if (depth_ == 2 && key_ == "metadata") in_meta_ = true;
    return true;
  }
  bool start_array(std::size_t) {
    ++depth_;
    return true;
  }
  bool end_object() {
    if (depth_ == 2 && in_meta_) return false;  // done: stop reading
    --depth_;
    return true;
  }
  bool end_array() {
    --depth_;
    return true;
  }
  bool key(json::string_t& k) {
    if (depth_ <= 2) key_ = std::move(k);
    return true;
  }
  bool parse_error(std::size_t, const std::string&, const nlohmann::detail::exception&) {
    return false;
  }
  std::string token;

 private:
  int depth_ = 0;
  bool in_meta_ = false;
  std::string key_;
};

std::string scan_continue(const std::string& body) {
  ContinueScanner s;
  nlohmann::json::sax_parse(body.begin(), body.end(), &s);
  return s.token;
}

void append_selectors(std::string& path, const ReflectorOptions& opt) {
  if (!opt.label_selector.empty()) path += "&labelSelector=" + escape_query(opt.label_selector);
  if (!opt.field_selector.empty()) path += "&fieldSelector=" + escape_query(opt.field_selector);
}

}  // namespace

Reflector::Reflector(Client& client, ReflectorOptions opt, ReflectorHandler& handler)
    : client_(client), opt_(std::move(opt)), handler_(handler) {
  if (opt_.fields) list_fields_ = opt_.fields->under("items");
}

std::string Reflector::page_path(const std::string& continue_token) const {
  std::string path = opt_.path + "?limit=" + std::to_string(std::max(1, opt_.page_size));
  if (!continue_token.empty()) path += "&continue=" + escape_query(continue_token);
  append_selectors(path, opt_);
  return path;
}

std::string Reflector::resource_version() const {
  std::lock_guard<std::mutex> lock(mu_);
  return rv_;
}

void Reflector::set_rv(const std::string& rv) {
  std::lock_guard<std::mutex> lock(mu_);
  rv_ = rv;
}

// Lists the whole collection in pages and delivers it. A 410 on a continue token (the snapshot
// expired between pages) restarts the list from the first page: on_list_begin is called again.
// The next page is asked for as soon as a page arrives, so the server prepares it while this
// thread parses and delivers the current one.
Reflector::ListResult Reflector::list_once(const std::atomic<bool>& stop) {
  std::string cont;
  bool begun = false;
  Response r = client_.get(page_path(""));
  while (!stop.load()) {
    if (r.status == 410 && !cont.empty()) {
      stats_.expired++;
      cont.clear();
      begun = false;  // start over; the handler sees a new on_list_begin
      r = client_.get(page_path(""));
      continue;
    }
    if (r.status == 404 && opt_.optional && cont.empty()) {
      // Not served: none exist. An empty list tells the handler those it had are gone.
      handler_.on_list_begin();
      handler_.on_list_end("");
      set_rv("");
      return ListResult::kAbsent;
    }
    if (!r.ok()) {
      stats_.errors++;
      set_error("list " + opt_.path + ": " + r.describe());
      return ListResult::kFailed;
    }
    const std::string ahead_token = scan_continue(r.body);
    std::future<Response> ahead;
    if (!ahead_token.empty()) {
      ahead = std::async(std::launch::async,
                         [this, path = page_path(ahead_token)] { return client_.get(path); });
    }
    nlohmann::json page = list_fields_ ? parse_masked(r.body, *list_fields_)
                                       : nlohmann::json::parse(r.body, nullptr, false);
    r.body.clear();
    r.body.shrink_to_fit();
    if (page.is_discarded() || !page.is_object()) {
      stats_.errors++;
      set_error("list " + opt_.path + ": response is not a JSON object");
      return ListResult::kFailed;  // (a page fetched ahead is waited for and dropped)
    }
    if (!begun) {
      handler_.on_list_begin();
      begun = true;
    }
    auto items = page.find("items");
    if (items != page.end() && items->is_array()) {
      for (auto& item : *items) handler_.on_list_item(std::move(item));
    }
    std::string rv = rv_of(page);
    cont.clear();
    if (auto m = page.find("metadata"); m != page.end() && m->is_object()) {
      auto c = m->find("continue");
      if (c != m->end() && c->is_string()) cont = c->get<std::string>();
    }
    if (cont.empty()) {
      set_rv(rv);
      stats_.lists++;
      handler_.on_list_end(rv);
      return ListResult::kDone;
    }
    if (stop.load()) break;
    r = ahead.valid() && cont == ahead_token ? ahead.get() : client_.get(page_path(cont));
  }
  return ListResult::kStopped;
}

void Reflector::run(const std::atomic<bool>& stop) {
  std::mt19937 rng(std::random_device{}());
  const auto bmin = std::max(opt_.backoff_min, std::chrono::milliseconds(1));
  const auto bmax = std::max(opt_.backoff_max, bmin);
  auto backoff = bmin;
  // Waits the current back-off (±25% jitter) and doubles it, up to the maximum.
  auto back_off = [&] {
    std::uniform_real_distribution<double> jitter(0.75, 1.25);
    auto d = std::chrono::milliseconds(
        static_cast<int64_t>(static_cast<double>(backoff.count()) * jitter(rng)));
    sleep_unless_stopped(d, stop);
    backoff = std::min(bmax, backoff * 2);
  };

  bool need_list = true;
  while (!stop.load()) {
    if (need_list) {
      auto res = list_once(stop);
      if (res == ListResult::kStopped) break;
      if (res == ListResult::kFailed) {
        back_off();
        continue;
      }
      if (res == ListResult::kAbsent) {
        if (!stats_.absent.exchange(true)) handler_.on_absent();
        sleep_unless_stopped(opt_.absent_recheck, stop);
        continue;
      }
      stats_.absent = false;
      need_list = false;
      backoff = bmin;
    }

    std::string path = opt_.path + "?watch=1&allowWatchBookmarks=true&resourceVersion=" +
                       escape_query(resource_version()) +
                       "&timeoutSeconds=" + std::to_string(std::max(1, opt_.watch_timeout_seconds));
    append_selectors(path, opt_);
    bool expired = false;
    bool error_event = false;
    bool got_any = false;
    auto started = Clock::now();
    WatchEnd end = client_.watch(
        path,
        [&](const WatchEvent& ev) {
          if (ev.type == "ERROR") {
            int code = ev.object.is_object() ? ev.object.value("code", 0) : 0;
            if (code == 410) {
              expired = true;
            } else {
              error_event = true;
              set_error("watch " + opt_.path + ": ERROR event: " + ev.object.dump());
            }
            return false;
          }
          got_any = true;
          std::string rv = rv_of(ev.object);
          if (ev.type == "BOOKMARK") {
            if (!rv.empty()) set_rv(rv);
            stats_.bookmarks++;
            return true;
          }
          if (ev.type != "ADDED" && ev.type != "MODIFIED" && ev.type != "DELETED") return true;
          // The handler takes the object; the event itself is const, so copy-free moving needs
          // the cast (the object is not used after this call).
          handler_.on_event(ev.type, std::move(const_cast<nlohmann::json&>(ev.object)));
          if (!rv.empty()) set_rv(rv);
          stats_.events++;
          return true;
        },
        stop, opt_.fields ? &*opt_.fields : nullptr);
    if (stop.load()) break;

    if (end.status == 404 && opt_.optional) {  // its CRD was removed: the list says so
      stats_.errors++;
      set_error("watch " + opt_.path + ": HTTP 404");
      need_list = true;
      if (!got_any) back_off();  // a watch that keeps answering 404 is not relisted in a loop
      continue;
    }
    if (end.status == 410 || expired) {
      // The version is too old: start over with a list. Back off only if this keeps happening
      // without the watch ever working.
      stats_.expired++;
      need_list = true;
      if (!got_any) back_off();
      continue;
    }
    bool healthy = end.status == 200 && end.error.empty() && !error_event;
    if (!healthy) {
      stats_.errors++;
      if (!error_event) {
        set_error("watch " + opt_.path + ": " +
                  (end.status == 0
                       ? "no answer: " + end.error
                       : "HTTP " + std::to_string(end.status) + ": " + end.error.substr(0, 300)));
      }
    }
    // A stream that delivered something or stayed open a while worked: resume promptly.
    if (healthy && (got_any || Clock::now() - started >= std::chrono::seconds(1))) {
      backoff = bmin;
    }
    back_off();
    if (stop.load()) break;
    stats_.reconnects++;
  }
}

void Reflector::set_error(std::string e) {
  std::lock_guard<std::mutex> lock(mu_);
  last_error_ = std::move(e);
}

std::string Reflector::last_error() const {
  std::lock_guard<std::mutex> lock(mu_);
  return last_error_;
}

}  // namespace tessera::kube
