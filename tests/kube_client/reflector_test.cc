#include "backend/kube/reflector.h"

#include <algorithm>
#include <deque>
#include <functional>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "kube_client/test_server.h"

namespace tessera::kube {
namespace {

using testing::TestServer;
using testing::wait_for;

std::string obj(const std::string& name, const std::string& rv) {
  return R"({"metadata":{"name":")" + name + R"(","resourceVersion":")" + rv + R"("}})";
}
std::string ev(const std::string& type, const std::string& name, const std::string& rv) {
  return R"({"type":")" + type + R"(","object":)" + obj(name, rv) + "}";
}
std::string bookmark(const std::string& rv) {
  return R"({"type":"BOOKMARK","object":{"kind":"Pod","metadata":{"resourceVersion":")" + rv +
         R"("}}})";
}
std::string error_event(int code) {
  return R"({"type":"ERROR","object":{"kind":"Status","apiVersion":"v1","status":"Failure","code":)" +
         std::to_string(code) + R"(,"reason":"Expired","message":"too old resource version"}})";
}
std::string page(const std::vector<std::string>& names, const std::string& rv,
                 const std::string& cont = "") {
  std::string items;
  for (const auto& n : names) items += (items.empty() ? "" : ",") + obj(n, rv);
  return R"({"kind":"PodList","apiVersion":"v1","metadata":{"resourceVersion":")" + rv +
         R"(","continue":")" + cont + R"("},"items":[)" + items + "]}";
}

// One scripted watch answer.
struct WatchScript {
  int status = 200;                 // non-200: answered with a Status body
  std::vector<std::string> chunks;  // written with a short pause between them
  enum End { kClose, kDrop, kHang } end = kClose;
};

// A scripted /api/v1/pods: `list` answers list requests; watches take the next script (and hang,
// sending nothing, when none is left). Every request's query is recorded.
class FakeApi {
 public:
  FakeApi() {
    server_.svr().Get("/api/v1/pods", [this](const httplib::Request& req, httplib::Response& res) {
      handle(req, res);
    });
  }
  int start(int port = 0) { return server_.start(port); }
  std::string url() const { return server_.url(); }
  void stop() { server_.stop(); }

  std::function<void(const httplib::Request&, httplib::Response&)> list;
  void add_watch(WatchScript w) {
    std::lock_guard<std::mutex> lock(mu_);
    watches_.push_back(std::move(w));
  }
  std::vector<std::string> queries() {
    std::lock_guard<std::mutex> lock(mu_);
    return queries_;
  }
  std::vector<std::string> watch_rvs() {
    std::lock_guard<std::mutex> lock(mu_);
    return watch_rvs_;
  }
  std::vector<httplib::Params> params() {
    std::lock_guard<std::mutex> lock(mu_);
    return params_;
  }

 private:
  void handle(const httplib::Request& req, httplib::Response& res) {
    bool watch = req.get_param_value("watch") == "1";
    WatchScript w;
    bool have_script = false;
    {
      std::lock_guard<std::mutex> lock(mu_);
      params_.push_back(req.params);
      if (watch) {
        queries_.push_back("watch rv=" + req.get_param_value("resourceVersion"));
        watch_rvs_.push_back(req.get_param_value("resourceVersion"));
        if (!watches_.empty()) {
          w = std::move(watches_.front());
          watches_.pop_front();
          have_script = true;
        }
      } else {
        queries_.push_back("list continue=" + req.get_param_value("continue"));
      }
    }
    if (!watch) {
      list(req, res);
      return;
    }
    if (!have_script) w.end = WatchScript::kHang;
    if (w.status != 200) {
      res.status = w.status;
      res.set_content(R"({"kind":"Status","code":)" + std::to_string(w.status) + "}",
                      "application/json");
      return;
    }
    const std::atomic<bool>& closing = server_.closing();
    res.set_chunked_content_provider(
        "application/json", [w, &closing](size_t, httplib::DataSink& sink) {
          for (const auto& c : w.chunks) {
            if (!sink.write(c.data(), c.size())) return false;
            std::this_thread::sleep_for(std::chrono::milliseconds(10));
          }
          if (w.end == WatchScript::kDrop) return false;
          if (w.end == WatchScript::kHang) {
            while (!closing && sink.is_writable()) {
              std::this_thread::sleep_for(std::chrono::milliseconds(10));
            }
            return false;
          }
          sink.done();
          return true;
        });
  }

  TestServer server_;
  std::mutex mu_;
  std::deque<WatchScript> watches_;
  std::vector<std::string> queries_, watch_rvs_;
  std::vector<httplib::Params> params_;
};

// Records what the reflector delivers.
class Recorder : public ReflectorHandler {
 public:
  void on_list_begin() override { add("begin"); }
  void on_list_item(nlohmann::json&& o) override {
    add("item:" + (whole ? o.dump() : o["metadata"]["name"].get<std::string>()));
  }
  void on_list_end(const std::string& rv) override { add("end:" + rv); }
  void on_event(const std::string& type, nlohmann::json&& o) override {
    add(type + ":" + (whole ? o.dump() : o["metadata"]["name"].get<std::string>()));
  }
  bool whole = false;  // log each object whole rather than its name
  std::vector<std::string> log() {
    std::lock_guard<std::mutex> lock(mu_);
    return log_;
  }
  size_t count(const std::string& entry) {
    auto l = log();
    return static_cast<size_t>(std::count(l.begin(), l.end(), entry));
  }

 private:
  void add(std::string s) {
    std::lock_guard<std::mutex> lock(mu_);
    log_.push_back(std::move(s));
  }
  std::mutex mu_;
  std::vector<std::string> log_;
};

// Runs a reflector on its own thread; stops and joins it on destruction.
class Running {
 public:
  Running(const std::string& url, ReflectorOptions opt, Recorder& rec) {
    KubeConfig cfg;
    cfg.server = url;
    client_ = std::make_unique<Client>(cfg, ClientOptions{2, std::chrono::milliseconds(2000), "t"});
    reflector_ = std::make_unique<Reflector>(*client_, std::move(opt), rec);
    thread_ = std::thread([this] { reflector_->run(stop_); });
  }
  ~Running() { stop(); }
  // Stops the reflector; returns how long run() took to return.
  std::chrono::milliseconds stop() {
    auto t0 = std::chrono::steady_clock::now();
    stop_ = true;
    if (thread_.joinable()) thread_.join();
    return std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() -
                                                                 t0);
  }
  Reflector& r() { return *reflector_; }

 private:
  std::atomic<bool> stop_{false};
  std::unique_ptr<Client> client_;
  std::unique_ptr<Reflector> reflector_;
  std::thread thread_;
};

ReflectorOptions options() {
  ReflectorOptions o;
  o.path = "/api/v1/pods";
  o.page_size = 2;
  o.watch_timeout_seconds = 60;
  o.backoff_min = std::chrono::milliseconds(10);
  o.backoff_max = std::chrono::milliseconds(80);
  return o;
}

// Pages of 2: [a, b] then [c], at resourceVersion `rv`.
void two_pages(FakeApi& api, const std::string& rv) {
  api.list = [rv](const httplib::Request& req, httplib::Response& res) {
    if (req.get_param_value("continue").empty()) {
      res.set_content(page({"a", "b"}, rv, "tok1"), "application/json");
    } else {
      res.set_content(page({"c"}, rv), "application/json");
    }
  };
}

using Log = std::vector<std::string>;

TEST(Reflector, ListsInPagesThenWatchesWithBookmarks) {
  FakeApi api;
  two_pages(api, "10");
  WatchScript w;
  w.chunks = {ev("ADDED", "d", "11") + "\n" + ev("MODIFIED", "a", "12") + "\n" +
                  ev("DELETED", "b", "13").substr(0, 20),
              ev("DELETED", "b", "13").substr(20) + "\n", bookmark("20") + "\n"};
  api.add_watch(w);
  api.start();
  Recorder rec;
  ReflectorOptions o = options();
  o.label_selector = "app=x";
  o.field_selector = "spec.schedulerName=tessera,spec.nodeName=";
  Running run(api.url(), o, rec);
  ASSERT_TRUE(wait_for([&] { return api.watch_rvs().size() >= 2; }));
  EXPECT_EQ(run.r().resource_version(), "20");
  run.stop();
  EXPECT_EQ(rec.log(), (Log{"begin", "item:a", "item:b", "item:c", "end:10", "ADDED:d",
                            "MODIFIED:a", "DELETED:b"}));
  auto q = api.queries();
  ASSERT_GE(q.size(), 4u);
  EXPECT_EQ(q[0], "list continue=");
  EXPECT_EQ(q[1], "list continue=tok1");
  EXPECT_EQ(q[2], "watch rv=10");
  EXPECT_EQ(q[3], "watch rv=20");  // resumed from the bookmark
  auto p = api.params();
  EXPECT_EQ(p[0].find("limit")->second, "2");
  EXPECT_EQ(p[0].find("labelSelector")->second, "app=x");
  EXPECT_EQ(p[0].find("fieldSelector")->second, "spec.schedulerName=tessera,spec.nodeName=");
  EXPECT_EQ(p[2].find("allowWatchBookmarks")->second, "true");
  EXPECT_EQ(p[2].find("timeoutSeconds")->second, "60");
  EXPECT_EQ(p[2].find("fieldSelector")->second, "spec.schedulerName=tessera,spec.nodeName=");
  EXPECT_EQ(run.r().stats().lists.load(), 1u);
  EXPECT_EQ(run.r().stats().events.load(), 3u);
  EXPECT_EQ(run.r().stats().bookmarks.load(), 1u);
  EXPECT_EQ(run.r().stats().reconnects.load(), 1u);
  EXPECT_EQ(run.r().stats().expired.load(), 0u);
}

TEST(Reflector, Http410OnWatchRelists) {
  FakeApi api;
  int lists = 0;
  api.list = [&](const httplib::Request&, httplib::Response& res) {
    ++lists;
    res.set_content(lists == 1 ? page({"a", "b"}, "5") : page({"b", "c"}, "9"), "application/json");
  };
  api.add_watch({410, {}, WatchScript::kClose});
  api.start();
  Recorder rec;
  ReflectorOptions o = options();
  o.page_size = 100;
  Running run(api.url(), o, rec);
  ASSERT_TRUE(wait_for([&] { return api.watch_rvs().size() >= 2; }));
  run.stop();
  EXPECT_EQ(rec.log(),
            (Log{"begin", "item:a", "item:b", "end:5", "begin", "item:b", "item:c", "end:9"}));
  EXPECT_EQ(api.watch_rvs()[0], "5");
  EXPECT_EQ(api.watch_rvs()[1], "9");
  EXPECT_EQ(run.r().stats().expired.load(), 1u);
  EXPECT_EQ(run.r().stats().lists.load(), 2u);
}

TEST(Reflector, InStreamError410Relists) {
  FakeApi api;
  int lists = 0;
  api.list = [&](const httplib::Request&, httplib::Response& res) {
    ++lists;
    res.set_content(lists == 1 ? page({"a"}, "5") : page({"a", "z"}, "30"), "application/json");
  };
  api.add_watch(
      {200, {ev("ADDED", "b", "6") + "\n" + error_event(410) + "\n"}, WatchScript::kHang});
  api.start();
  Recorder rec;
  Running run(api.url(), options(), rec);
  ASSERT_TRUE(wait_for([&] { return api.watch_rvs().size() >= 2; }));
  run.stop();
  EXPECT_EQ(rec.log(),
            (Log{"begin", "item:a", "end:5", "ADDED:b", "begin", "item:a", "item:z", "end:30"}));
  EXPECT_EQ(api.watch_rvs(), (std::vector<std::string>{"5", "30"}));
  EXPECT_EQ(run.r().stats().expired.load(), 1u);
}

TEST(Reflector, AFieldMaskKeepsOnlyItsFieldsYetAnErrorEventIsReadWhole) {
  FakeApi api;
  int lists = 0;
  api.list = [&](const httplib::Request&, httplib::Response& res) {
    ++lists;
    res.set_content(lists == 1 ? page({"a"}, "5") : page({"z"}, "30"), "application/json");
  };
  // The 410's Status has no metadata.name: masked like a pod, its code would be lost.
  api.add_watch(
      {200, {ev("ADDED", "b", "6") + "\n" + error_event(410) + "\n"}, WatchScript::kHang});
  api.start();
  Recorder rec;
  rec.whole = true;
  ReflectorOptions o = options();
  o.fields = FieldMask::of({"metadata.name"});
  Running run(api.url(), o, rec);
  ASSERT_TRUE(wait_for([&] { return api.watch_rvs().size() >= 2; }));
  run.stop();
  EXPECT_EQ(rec.log(), (Log{"begin", R"(item:{"metadata":{"name":"a"}})", "end:5",
                            R"(ADDED:{"metadata":{"name":"b"}})", "begin",
                            R"(item:{"metadata":{"name":"z"}})", "end:30"}));
  EXPECT_EQ(api.watch_rvs(), (std::vector<std::string>{"5", "30"}));  // versions still followed
  EXPECT_EQ(run.r().stats().expired.load(), 1u);
}

TEST(Reflector, DroppedStreamResumesFromLastVersion) {
  FakeApi api;
  api.list = [](const httplib::Request&, httplib::Response& res) {
    res.set_content(page({"a"}, "5"), "application/json");
  };
  // An event, then half of one, then the connection drops.
  api.add_watch({200,
                 {ev("ADDED", "b", "7") + "\n" + ev("ADDED", "c", "8").substr(0, 25)},
                 WatchScript::kDrop});
  api.add_watch({200, {ev("ADDED", "c", "8") + "\n"}, WatchScript::kClose});
  api.start();
  Recorder rec;
  Running run(api.url(), options(), rec);
  ASSERT_TRUE(wait_for([&] { return api.watch_rvs().size() >= 3; }));
  run.stop();
  EXPECT_EQ(api.watch_rvs(), (std::vector<std::string>{"5", "7", "8"}));
  EXPECT_EQ(rec.log(), (Log{"begin", "item:a", "end:5", "ADDED:b", "ADDED:c"}));
  EXPECT_EQ(run.r().stats().lists.load(), 1u);
  EXPECT_EQ(run.r().stats().reconnects.load(), 2u);
}

TEST(Reflector, OtherErrorEventBacksOffAndResumes) {
  FakeApi api;
  api.list = [](const httplib::Request&, httplib::Response& res) {
    res.set_content(page({"a"}, "5"), "application/json");
  };
  api.add_watch(
      {200, {ev("MODIFIED", "a", "6") + "\n" + error_event(500) + "\n"}, WatchScript::kHang});
  api.add_watch({500, {}, WatchScript::kClose});
  api.start();
  Recorder rec;
  Running run(api.url(), options(), rec);
  ASSERT_TRUE(wait_for([&] { return api.watch_rvs().size() >= 3; }));
  run.stop();
  EXPECT_EQ(api.watch_rvs(), (std::vector<std::string>{"5", "6", "6"}));
  EXPECT_EQ(run.r().stats().lists.load(), 1u);
  EXPECT_EQ(run.r().stats().expired.load(), 0u);
  EXPECT_GE(run.r().stats().errors.load(), 2u);
  EXPECT_EQ(rec.log(), (Log{"begin", "item:a", "end:5", "MODIFIED:a"}));
}

TEST(Reflector, ExpiredContinueTokenRestartsTheList) {
  FakeApi api;
  int calls = 0;
  api.list = [&](const httplib::Request& req, httplib::Response& res) {
    ++calls;
    std::string cont = req.get_param_value("continue");
    if (cont.empty()) {
      res.set_content(page({"a", "b"}, calls == 1 ? "5" : "8", calls == 1 ? "old" : "new"),
                      "application/json");
    } else if (cont == "old") {
      res.status = 410;
      res.set_content(R"({"kind":"Status","code":410,"reason":"Expired"})", "application/json");
    } else {
      res.set_content(page({"c"}, "8"), "application/json");
    }
  };
  api.start();
  Recorder rec;
  Running run(api.url(), options(), rec);
  ASSERT_TRUE(wait_for([&] { return api.watch_rvs().size() >= 1; }));
  run.stop();
  EXPECT_EQ(rec.log(),
            (Log{"begin", "item:a", "item:b", "begin", "item:a", "item:b", "item:c", "end:8"}));
  auto q = api.queries();
  ASSERT_GE(q.size(), 5u);
  EXPECT_EQ(q[0], "list continue=");
  EXPECT_EQ(q[1], "list continue=old");
  EXPECT_EQ(q[2], "list continue=");
  EXPECT_EQ(q[3], "list continue=new");
  EXPECT_EQ(q[4], "watch rv=8");
  EXPECT_EQ(run.r().stats().lists.load(), 1u);
  EXPECT_EQ(run.r().stats().expired.load(), 1u);
}

TEST(Reflector, RetriesUntilTheServerComesUp) {
  int port;
  {
    TestServer probe;
    port = probe.start();
  }  // the port is free again: connections are refused
  Recorder rec;
  std::string url = "http://127.0.0.1:" + std::to_string(port);
  Running run(url, options(), rec);
  ASSERT_TRUE(wait_for([&] { return run.r().stats().errors.load() >= 3; }));
  EXPECT_TRUE(rec.log().empty());
  EXPECT_EQ(run.r().resource_version(), "");
  EXPECT_NE(run.r().last_error().find("no answer"), std::string::npos) << run.r().last_error();

  FakeApi api;
  api.list = [](const httplib::Request&, httplib::Response& res) {
    res.set_content(page({"a"}, "3"), "application/json");
  };
  api.start(port);
  ASSERT_TRUE(wait_for([&] { return api.watch_rvs().size() >= 1; }));
  EXPECT_EQ(rec.log(), (Log{"begin", "item:a", "end:3"}));

  // The server goes away mid-watch and comes back: the watch resumes from the last version.
  api.stop();
  FakeApi again;
  again.list = api.list;
  again.start(port);
  ASSERT_TRUE(wait_for([&] { return again.watch_rvs().size() >= 1; }));
  EXPECT_EQ(again.watch_rvs()[0], "3");
  EXPECT_EQ(run.r().stats().lists.load(), 1u);
}

// A custom resource whose CRD is not installed: an empty collection, said once, listed again
// at the recheck interval (not at the back-off's pace, and not counted as errors); once its CRD
// is installed, listed and watched as any other.
TEST(Reflector, AnOptionalCollectionNotServedIsEmptyUntilItIs) {
  FakeApi api;
  std::atomic<int> lists{0};
  std::atomic<bool> served{false};
  api.list = [&](const httplib::Request&, httplib::Response& res) {
    ++lists;
    if (!served) {
      res.status = 404;
      res.set_content(R"({"kind":"Status","code":404,"reason":"NotFound"})", "application/json");
      return;
    }
    res.set_content(page({"a"}, "5"), "application/json");
  };
  api.start();
  class Absent : public Recorder {
   public:
    void on_absent() override { ++absent; }
    std::atomic<int> absent{0};
  };
  Absent absent_rec;
  ReflectorOptions opt = options();
  opt.optional = true;
  opt.absent_recheck = std::chrono::milliseconds(300);
  Running run(api.url(), opt, absent_rec);
  ASSERT_TRUE(wait_for([&] { return lists.load() >= 3; }));
  EXPECT_EQ(absent_rec.absent.load(), 1);  // said once, however often it is looked for
  EXPECT_EQ(run.r().stats().errors.load(), 0u);
  EXPECT_TRUE(run.r().stats().absent.load());
  EXPECT_EQ(absent_rec.count("begin"), absent_rec.count("end:"));  // each an empty list
  EXPECT_TRUE(api.watch_rvs().empty());  // nothing is watched while it is not served

  served = true;
  ASSERT_TRUE(wait_for([&] { return api.watch_rvs().size() >= 1; }));
  EXPECT_EQ(absent_rec.count("item:a"), 1u);
  EXPECT_EQ(api.watch_rvs()[0], "5");
  EXPECT_FALSE(run.r().stats().absent.load());
}

TEST(Reflector, StopEndsABlockedWatchPromptly) {
  FakeApi api;
  api.list = [](const httplib::Request&, httplib::Response& res) {
    res.set_content(page({"a"}, "3"), "application/json");
  };
  api.start();
  Recorder rec;
  Running run(api.url(), options(), rec);
  ASSERT_TRUE(wait_for([&] { return api.watch_rvs().size() >= 1; }));
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  EXPECT_LT(run.stop(), std::chrono::milliseconds(1000));
}

}  // namespace
}  // namespace tessera::kube
