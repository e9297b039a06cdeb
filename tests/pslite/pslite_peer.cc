// pslite_peer: a node of a test cluster written against ps-lite's public API
// (include/ps/ps.h), so that psrs's tests run a ps-lite scheduler, server and worker
// without ps-lite's own test programs. tests/common/pslite.rs builds it with ps-lite's
// library (build/libps.a) and headers, taken from ps-lite's source at build time.
// It runs the role DMLC_ROLE names and checks ps-lite's KV and SimpleApp semantics
// against whatever nodes the cluster has (ps-lite's or psrs's); it prints one
// "pslite_peer ... ok" line on stdout when every check passed, a "pslite_peer
// MISMATCH: ..." line on stderr for each that did not, and then exits 1.
//
//   pslite_peer kv [--keys N] [--repeat R] [--window K] [--customers C] [--lens] [--apps A]
//   pslite_peer simple [--requests N]
//
// kv, every role:
//   scheduler  starts and finalizes.
//   server     serves apps 0..A-1 (each its own store) with ps-lite's
//              KVServerDefaultHandle<float> (pushes add up, pulls answer the sums),
//              checking each request's KVMeta first: the sender is a worker, push or
//              pull is set, a push carries one value per key and a pull alone none, the
//              keys are sorted and inside this server's key range, cmd is 0 or tells
//              push and pull (100 + push + 2 * pull), and no (sender, customer,
//              timestamp) arrives twice.
//   worker     (a) the server key ranges split [0, kMaxKey) evenly; (b) the keys psrs
//              kv-test pushes (key i = i * (kMaxKey / N), value i % 100 + 1), ZPushed R
//              times with K requests in flight and a callback each, then a barrier of
//              the worker group, then a ZPull: every value is exactly R x workers x
//              pushed (psrs kv-test workers may be among the workers); (c) C
//              customers (ids 0 and 1 of app 0; default 2) at once (with PS_RESEND
//              give 1: ps-lite's resender tells messages apart by app, sender,
//              receiver and timestamp, not by customer), each on keys of its own plus
//              the first and last key of every server's range: R ZPushes with K in
//              flight, then one ZPull per server's slice and strided subsets, all in
//              flight at once, each checked against its own keys, then ZPushPull and
//              ZPull; (d) with --lens, keys with 1 to 3 values each (lens), pushed R
//              times and pulled with their lens (needs servers that keep lens: ps-lite's
//              default handle does not); (e) with --apps 2, app 1 keeps its own store
//              for the same keys.
// simple, every role (ps-lite's SimpleApp): the scheduler sends N requests (head 1,
//   body "test") to every node, itself included, and checks each answer (head, sender,
//   one answer per node per request); every node checks and answers each request, and
//   once finalized checks it answered exactly N.
#include <algorithm>
#include <chrono>
#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <tuple>
#include <vector>
#include "ps/ps.h"

// With PS_RESEND on, waits two resend timeouts before Finalize: ps-lite's Van::Stop
// stops its receiving thread before it deletes its resender, and an acknowledgement
// still on its way then is never taken; the resender's next look logs the message as
// overdue through my_node(), whose CHECK(ready_) aborts the process. Waiting lets the
// last resends be acknowledged while the node still receives.
static void SettleResends() {
  const char* on = getenv("PS_RESEND");
  if (on == nullptr || atoi(on) == 0) return;
  const char* t = getenv("PS_RESEND_TIMEOUT");
  int ms = t != nullptr ? atoi(t) : 1000;
  std::this_thread::sleep_for(std::chrono::milliseconds(2 * (ms > 0 ? ms : 1000)));
}

using namespace ps;

namespace {

/// Every mismatch found, printed as it is found.
class Checks {
 public:
  void Expect(bool ok, const std::string& what) {
    if (ok) return;
    std::lock_guard<std::mutex> lk(mu_);
    ++failed_;
    fprintf(stderr, "pslite_peer MISMATCH: %s\n", what.c_str());
    fflush(stderr);
  }
  int failed() {
    std::lock_guard<std::mutex> lk(mu_);
    return failed_;
  }

 private:
  std::mutex mu_;
  int failed_ = 0;
};

Checks checks;

template <typename... T>
std::string Str(const T&... parts) {
  std::ostringstream os;
  using expand = int[];
  (void)expand{0, ((void)(os << parts), 0)...};
  return os.str();
}

struct Opts {
  std::string mode;
  size_t keys = 1000;
  int repeat = 10;
  size_t window = 8;
  int customers = 2;
  bool lens = false;
  int apps = 1;
  int requests = 100;
};

bool Parse(int argc, char* argv[], Opts* o) {
  if (argc < 2) return false;
  o->mode = argv[1];
  if (o->mode != "kv" && o->mode != "simple") return false;
  for (int i = 2; i < argc; ++i) {
    std::string a = argv[i];
    auto value = [&](long min) -> long {
      if (i + 1 >= argc) return -1;
      long v = atol(argv[++i]);
      return v < min ? -1 : v;
    };
    long v = 0;
    if (a == "--lens") {
      o->lens = true;
    } else if (a == "--keys" && (v = value(1)) > 0) {
      o->keys = v;
    } else if (a == "--repeat" && (v = value(1)) > 0) {
      o->repeat = v;
    } else if (a == "--window" && (v = value(1)) > 0) {
      o->window = v;
    } else if (a == "--customers" && (v = value(1)) > 0 && v <= 2) {
      o->customers = v;
    } else if (a == "--apps" && (v = value(1)) > 0 && v <= 2) {
      o->apps = v;
    } else if (a == "--requests" && (v = value(1)) > 0) {
      o->requests = v;
    } else {
      fprintf(stderr, "pslite_peer: bad argument %s\n", a.c_str());
      return false;
    }
  }
  return true;
}

int MyId() { return Postoffice::Get()->van()->my_node().id; }

// ---------------------------------------------------------------- kv: server

/// ps-lite's KVServerDefaultHandle behind checks of each request's KVMeta.
class CheckedHandle {
 public:
  explicit CheckedHandle(int app) : app_(app) {}

  void operator()(const KVMeta& meta, const KVPairs<float>& req, KVServer<float>* server) {
    if (workers_.empty()) {
      // (made before this node started: the node table is known by the first request)
      for (int id : Postoffice::Get()->GetNodeIDs(kWorkerGroup)) workers_.insert(id);
      range_ = Postoffice::Get()->GetServerKeyRanges()[MyRank()];
    }
    std::string at = Str("app ", app_, " request ", meta.timestamp, " of node ", meta.sender,
                         " customer ", meta.customer_id);
    checks.Expect(workers_.count(meta.sender) == 1, Str(at, ": the sender is no worker"));
    checks.Expect(meta.push || meta.pull, Str(at, ": neither push nor pull"));
    checks.Expect(meta.cmd == 0 || meta.cmd == 100 + meta.push + 2 * meta.pull,
                  Str(at, ": cmd ", meta.cmd, " for push=", meta.push, " pull=", meta.pull));
    checks.Expect(req.lens.empty(), Str(at, ": lens, which ps-lite's default handle cannot keep"));
    size_t n = req.keys.size();
    checks.Expect(n > 0, Str(at, ": no keys"));
    if (meta.push) {
      checks.Expect(req.vals.size() == n, Str(at, ": ", req.vals.size(), " values for ", n, " keys"));
    } else {
      checks.Expect(req.vals.empty(), Str(at, ": a pull with ", req.vals.size(), " values"));
    }
    for (size_t i = 0; i < n; ++i) {
      Key k = req.keys[i];
      bool sorted = i == 0 || req.keys[i - 1] < k;
      bool inside = range_.begin() <= k && k < range_.end();
      if (!sorted || !inside) {
        checks.Expect(false, Str(at, ": key ", k, sorted ? " outside this server's range" : " out of order"));
        break;
      }
    }
    bool first = seen_.insert(std::make_tuple(meta.sender, meta.customer_id, meta.timestamp)).second;
    checks.Expect(first, Str(at, ": arrived twice"));
    customers_.insert(std::make_pair(meta.sender, meta.customer_id));
    pushes_ += meta.push;
    pulls_ += meta.pull;
    // (a failed check still answers: the worker then fails on its values, not a hang)
    if (meta.push && req.vals.size() != n) {
      server->Response(meta);
      return;
    }
    sum_(meta, req, server);
  }

  int app_;
  Range range_;
  std::set<int> workers_;
  std::set<std::tuple<int, int, int>> seen_;
  std::set<std::pair<int, int>> customers_;
  long pushes_ = 0, pulls_ = 0;
  KVServerDefaultHandle<float> sum_;
};

/// The server: its KVServers are made before it starts, as MXNet's server makes its
/// KVServer before ps::StartAsync. ps-lite's scheduler releases the workers from the
/// start barrier before the servers, and a worker's first request can reach a server
/// before its own release; ps-lite's receiving thread then waits (5 s at most, and
/// fails) for the request's customer, and cannot take the release meanwhile.
int Server(const Opts& o) {
  std::vector<std::unique_ptr<KVServer<float>>> servers;
  std::vector<std::shared_ptr<CheckedHandle>> handles;
  for (int app = 0; app < o.apps; ++app) {
    auto h = std::make_shared<CheckedHandle>(app);
    servers.emplace_back(new KVServer<float>(app));
    servers.back()->set_request_handle(
        [h](const KVMeta& m, const KVPairs<float>& r, KVServer<float>* s) { (*h)(m, r, s); });
    handles.push_back(h);
  }
  Start(0);
  int id = MyId();
  SettleResends();
  Finalize(0, true);
  servers.clear();  // joins the customers' threads: the handles are quiet from here
  long pushes = 0, pulls = 0;
  std::set<std::pair<int, int>> customers;
  for (auto& h : handles) {
    pushes += h->pushes_;
    pulls += h->pulls_;
    customers.insert(h->customers_.begin(), h->customers_.end());
  }
  checks.Expect(pushes > 0 && pulls > 0, Str("server ", id, " got ", pushes, " pushes and ", pulls, " pulls"));
  if (checks.failed()) return 1;
  printf("pslite_peer server ok: node %d answered %ld pushes and %ld pulls of %zu customers, KVMeta checked\n", id,
         pushes, pulls, customers.size());
  return 0;
}

// ---------------------------------------------------------------- kv: worker

/// Key i of n spread over the key space, plus offset (psrs kv-test's keys at offset 0).
SArray<Key> Spread(size_t n, Key offset) {
  SArray<Key> keys;
  for (size_t i = 0; i < n; ++i) keys.push_back(kMaxKey / n * i + offset);
  return keys;
}

/// Waits for every timestamp in ts.
template <typename W>
void WaitAll(W* kv, const std::vector<int>& ts) {
  for (int t : ts) kv->Wait(t);
}

/// `repeat` ZPushes of keys/vals(/lens) with at most `window` in flight, each with a
/// callback; checks the callbacks ran and the timestamps are consecutive.
void PushRepeatedly(KVWorker<float>* kv, const SArray<Key>& keys, const SArray<float>& vals,
                    const SArray<int>& lens, const Opts& o, const std::string& what) {
  std::atomic<int> called{0};
  std::vector<int> ts;
  for (int i = 0; i < o.repeat; ++i) {
    ts.push_back(kv->ZPush(keys, vals, lens, 101, [&called] { ++called; }));
    if (ts.size() > o.window) kv->Wait(ts[ts.size() - 1 - o.window]);
  }
  WaitAll(kv, ts);
  checks.Expect(called == o.repeat, Str(what, ": ", called.load(), " of ", o.repeat, " push callbacks ran"));
  for (size_t i = 1; i < ts.size(); ++i) {
    checks.Expect(ts[i] == ts[i - 1] + 1, Str(what, ": timestamps ", ts[i - 1], " then ", ts[i]));
  }
}

/// Checks got[i] == want[i] * times for every i.
void ExpectTimes(const SArray<float>& got, const SArray<float>& want, float times, const std::string& what) {
  if (got.size() != want.size()) {
    checks.Expect(false, Str(what, ": ", got.size(), " values, expected ", want.size()));
    return;
  }
  for (size_t i = 0; i < want.size(); ++i) {
    if (got[i] != want[i] * times) {
      checks.Expect(false, Str(what, ": value ", i, " is ", got[i], ", expected ", want[i] * times));
      return;
    }
  }
}

/// (b): psrs kv-test's keys and values, summed over every worker after a barrier.
void SharedKeys(KVWorker<float>* kv, const Opts& o) {
  SArray<Key> keys = Spread(o.keys, 0);
  SArray<float> vals;
  for (size_t i = 0; i < o.keys; ++i) vals.push_back(i % 100 + 1);
  PushRepeatedly(kv, keys, vals, {}, o, "shared keys");
  Postoffice::Get()->Barrier(0, kWorkerGroup);
  SArray<float> got;
  kv->Wait(kv->ZPull(keys, &got, nullptr, 102));
  ExpectTimes(got, vals, float(o.repeat) * NumWorkers(), "shared keys after the workers' barrier");
}

/// This customer's keys: `n` spread at an offset of its own, and the first and last
/// key of every server's range (moved by the rank so no two workers share them).
SArray<Key> OwnKeys(size_t n, Key offset) {
  std::vector<Key> keys;
  for (Key k : Spread(n, offset)) keys.push_back(k);
  for (const Range& r : Postoffice::Get()->GetServerKeyRanges()) {
    keys.push_back(r.begin() + offset);
    keys.push_back(r.end() - 1 - offset);
  }
  std::sort(keys.begin(), keys.end());
  keys.erase(std::unique(keys.begin(), keys.end()), keys.end());
  return SArray<Key>(keys);
}

/// The positions of keys inside [begin, end).
std::vector<size_t> Inside(const SArray<Key>& keys, Key begin, Key end) {
  std::vector<size_t> at;
  for (size_t i = 0; i < keys.size(); ++i)
    if (begin <= keys[i] && keys[i] < end) at.push_back(i);
  return at;
}

/// (c): one customer's keys, pushed, then pulled in slices all in flight at once.
void OwnCustomer(KVWorker<float>* kv, int customer, const Opts& o) {
  std::string who = Str("customer ", customer);
  Key offset = (Key(1) << (33 + customer)) + MyRank();
  SArray<Key> keys = OwnKeys(o.keys, offset);
  SArray<float> vals;
  for (size_t i = 0; i < keys.size(); ++i) vals.push_back(i % 50 + 1 + 100 * customer);
  PushRepeatedly(kv, keys, vals, {}, o, who);

  // subsets: each server's slice, and every third key from 0, 1, 2
  std::vector<std::vector<size_t>> subsets;
  for (const Range& r : Postoffice::Get()->GetServerKeyRanges()) subsets.push_back(Inside(keys, r.begin(), r.end()));
  for (size_t s = 0; s < 3; ++s) {
    subsets.emplace_back();
    for (size_t i = s; i < keys.size(); i += 3) subsets.back().push_back(i);
  }
  std::vector<SArray<Key>> sub_keys(subsets.size());
  std::vector<SArray<float>> sub_want(subsets.size()), sub_got(subsets.size());
  std::vector<int> ts;
  for (size_t s = 0; s < subsets.size(); ++s) {
    for (size_t i : subsets[s]) {
      sub_keys[s].push_back(keys[i]);
      sub_want[s].push_back(vals[i]);
    }
  }
  for (size_t s = 0; s < subsets.size(); ++s) ts.push_back(kv->ZPull(sub_keys[s], &sub_got[s], nullptr, 102));
  WaitAll(kv, ts);
  for (size_t s = 0; s < subsets.size(); ++s) {
    ExpectTimes(sub_got[s], sub_want[s], o.repeat, Str(who, " pull ", s, " of ", subsets.size(), " in flight"));
  }

  SArray<float> out;
  kv->Wait(kv->ZPushPull(keys, vals, &out, nullptr, 103));
  ExpectTimes(out, vals, o.repeat + 1, Str(who, " push-pull"));
  SArray<float> got;
  kv->Wait(kv->ZPull(keys, &got, nullptr, 102));
  ExpectTimes(got, vals, o.repeat + 1, Str(who, " pull after the push-pull"));
}

/// (d): keys with 1 to 3 values each, sent with their lens.
void Lens(KVWorker<float>* kv, const Opts& o) {
  SArray<Key> keys = Spread(o.keys, (Key(3) << 33) + MyRank());
  SArray<int> lens;
  SArray<float> vals;
  for (size_t i = 0; i < keys.size(); ++i) {
    lens.push_back(1 + i % 3);
    for (int j = 0; j < lens.back(); ++j) vals.push_back(i % 10 + j + 1);
  }
  PushRepeatedly(kv, keys, vals, lens, o, "lens");
  SArray<float> got;
  SArray<int> got_lens;
  kv->Wait(kv->ZPull(keys, &got, &got_lens, 102));
  ExpectTimes(got, vals, o.repeat, "values pulled with lens");
  bool same = got_lens.size() == lens.size() && std::equal(lens.begin(), lens.end(), got_lens.begin());
  checks.Expect(same, "pulled lens differ from the pushed ones");
}

/// (e): app 1 keeps a store of its own for customer 0's keys.
void OtherApp(KVWorker<float>* kv0, const Opts& o) {
  KVWorker<float> kv1(1, 0);
  SArray<Key> keys = OwnKeys(o.keys, (Key(1) << 33) + MyRank());
  SArray<float> vals;
  for (size_t i = 0; i < keys.size(); ++i) vals.push_back(7);
  kv1.Wait(kv1.ZPush(keys, vals, {}, 101));
  SArray<float> got1, got0;
  int t1 = kv1.ZPull(keys, &got1, nullptr, 102);
  int t0 = kv0->ZPull(keys, &got0, nullptr, 102);
  kv1.Wait(t1);
  kv0->Wait(t0);
  ExpectTimes(got1, vals, 1, "app 1's own store");
  SArray<float> want0;
  for (size_t i = 0; i < keys.size(); ++i) want0.push_back(i % 50 + 1);
  ExpectTimes(got0, want0, o.repeat + 1, "app 0's store beside app 1's");
}

/// (a): ps-lite's key ranges: [0, kMaxKey) split evenly, one per server.
void KeyRanges() {
  const auto& ranges = Postoffice::Get()->GetServerKeyRanges();
  int n = NumServers();
  checks.Expect(int(ranges.size()) == n, Str(ranges.size(), " key ranges for ", n, " servers"));
  for (int i = 0; i < int(ranges.size()); ++i) {
    checks.Expect(ranges[i].begin() == kMaxKey / n * i && ranges[i].end() == kMaxKey / n * (i + 1),
                  Str("key range ", i, " is [", ranges[i].begin(), ", ", ranges[i].end(), ")"));
  }
}

int Worker(const Opts& o) {
  int id = MyId(), workers = NumWorkers(), servers = NumServers();
  KeyRanges();
  KVWorker<float> kv0(0, 0);
  SharedKeys(&kv0, o);
  if (o.customers > 1) {
    KVWorker<float> kv1(0, 1);
    std::thread other([&] { OwnCustomer(&kv1, 1, o); });
    OwnCustomer(&kv0, 0, o);
    other.join();
  } else {
    OwnCustomer(&kv0, 0, o);
  }
  if (o.lens) Lens(&kv0, o);
  if (o.apps > 1) OtherApp(&kv0, o);
  SettleResends();
  Finalize(0, true);
  if (checks.failed()) return 1;
  printf("pslite_peer ok: worker %d checked %zu keys = %d x %d workers' pushes after a barrier, own keys of %d "
         "customer%s (slices in flight, push-pull), key ranges of %d servers%s%s\n",
         id, o.keys, o.repeat, workers, o.customers, o.customers > 1 ? "s" : "", servers, o.lens ? ", lens" : "",
         o.apps > 1 ? ", app 1's own store" : "");
  return 0;
}

/// This process's DMLC_ROLE (ps-lite knows it only once started).
std::string Role() {
  const char* role = getenv("DMLC_ROLE");
  return role ? role : "";
}

int Kv(const Opts& o) {
  if (Role() == "server") return Server(o);
  Start(0);
  if (IsWorker()) return Worker(o);
  SettleResends();
  Finalize(0, true);
  printf("pslite_peer scheduler ok\n");
  return 0;
}

// ---------------------------------------------------------------- simple

int Simple(const Opts& o) {
  // (the app made before this node starts, as a server's KVServers are: a request can
  // reach it before its release from the start barrier)
  std::atomic<int> answered{0};
  SimpleApp app(0, 0);
  app.set_request_handle([&answered](const SimpleData& req, SimpleApp* a) {
    checks.Expect(req.head == 1 && req.body == "test",
                  Str("request ", req.timestamp, " of node ", req.sender, ": head ", req.head, " body ", req.body));
    a->Response(req);
    ++answered;
  });
  std::mutex mu;
  std::map<int, std::multiset<int>> answers;  // timestamp -> senders
  app.set_response_handle([&](const SimpleData& res, SimpleApp*) {
    checks.Expect(res.head == 1 && res.body.empty(), Str("answer from ", res.sender, ": head ", res.head));
    std::lock_guard<std::mutex> lk(mu);
    answers[res.timestamp].insert(res.sender);
  });
  Start(0);
  int id = MyId();
  if (IsScheduler()) {
    int all = kScheduler + kServerGroup + kWorkerGroup;
    std::vector<int> nodes = Postoffice::Get()->GetNodeIDs(all);
    std::multiset<int> every(nodes.begin(), nodes.end());
    std::vector<int> ts;
    for (int i = 0; i < o.requests; ++i) ts.push_back(app.Request(1, "test", all));
    for (int t : ts) app.Wait(t);
    std::lock_guard<std::mutex> lk(mu);
    for (int t : ts) checks.Expect(answers[t] == every, Str("request ", t, ": ", answers[t].size(), " answers"));
    checks.Expect(answers.size() == ts.size(), Str(answers.size(), " timestamps answered"));
  }
  SettleResends();
  Finalize(0, true);
  checks.Expect(answered == o.requests, Str("node ", id, " answered ", answered.load(), " requests"));
  if (checks.failed()) return 1;
  printf("pslite_peer simple ok: node %d answered %d requests\n", id, answered.load());
  return 0;
}

}  // namespace

int main(int argc, char* argv[]) {
  Opts o;
  if (!Parse(argc, argv, &o)) {
    fprintf(stderr,
            "usage: pslite_peer kv [--keys N] [--repeat R] [--window K] [--customers 1|2] [--lens] [--apps 1|2]\n"
            "       pslite_peer simple [--requests N]\n");
    return 2;
  }
  int rc = o.mode == "kv" ? Kv(o) : Simple(o);
  fflush(stdout);
  return rc;
}
