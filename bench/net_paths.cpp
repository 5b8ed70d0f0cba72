// occl-net-paths: which UCX data path should the NET connector's proxy use? Two ranks as threads
// of one process, each with its own UCX worker, stream slot-sized messages through a FIFO of
// `--window` slots exactly as the connector does: the sender may reuse a slot only when its send
// completed and the receiver returned a credit (an 8-byte active message) for it.
//   tag : ucp_tag_send_nbx into receives the receiver pre-posts for the next `window` steps;
//   am  : ucp_am_send_nbx with the step in the header; eager data is copied into the slot, a
//         rendezvous one received into it with ucp_am_recv_data_nbx;
//   put : ucp_put_nbx into the receiver's ucp_mem_map'ed slots, ucp_worker_fence, then an
//         active message that publishes the step (over tcp UCX emulates the put with AMs).
//   connector : the NET connector itself (transport/net, which uses am): two NetFactory ranks,
//         their proxy threads, and two threads that use the FIFOs as daemon blocks do (yielding
//         while they wait), so it includes the proxy's polling and back-off.
// Usage: occl-net-paths [--tls tcp] [--window 4] [--min 8] [--max 64M] [--factor 4]
// Prints a markdown table: per path, microseconds per message and GB/s (1e9 bytes/s).
#include <sys/mman.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "cli/flags.hpp"
#include "transport/net/connectors.hpp"
#include "transport/net/ucx.hpp"

namespace {

using occl::transport::net::UcxOptions;
using occl::transport::net::UcxWorker;

enum class Path { Tag, Am, Put };
constexpr unsigned kDataAm = 1, kCreditAm = 2, kPutDoneAm = 3;

struct Side {
  std::unique_ptr<UcxWorker> w;
  ucp_ep_h ep = nullptr;
  char* slots = nullptr;  // window * bytes
  // Receiver: steps whose data is in its slot (set by callbacks, read by the loop).
  std::vector<uint8_t> arrived;
  uint64_t nextCredit = 0;  // receiver: steps credited so far
  // Sender: credits received, completed sends.
  uint64_t credited = 0;
  std::vector<uint8_t> sendDone;
  uint64_t completed = 0;
  ucp_mem_h memh = nullptr;
  ucp_rkey_h rkey = nullptr;  // sender: the receiver's slots
  uint64_t remoteBase = 0;
};

struct Run {
  Path path;
  size_t bytes;
  uint32_t window;
  uint64_t steps;
};

void die(const char* what, ucs_status_t st) {
  std::fprintf(stderr, "occl-net-paths: %s: %s\n", what, ucs_status_string(st));
  std::exit(1);
}

// Completion of a step's operation: `user_data` is the flag to set.
void flagDone(void* request, ucs_status_t status, void* user) {
  if (status != UCS_OK) die("operation", status);
  *static_cast<uint8_t*>(user) = 1;
  ucp_request_free(request);
}
void flagDoneRecv(void* request, ucs_status_t status, const ucp_tag_recv_info_t*, void* user) {
  flagDone(request, status, user);
}
void flagDoneAmRecv(void* request, ucs_status_t status, size_t, void* user) { flagDone(request, status, user); }

Side* g_recv = nullptr;
Side* g_send = nullptr;
Run g_run;

ucs_status_t onData(void* arg, const void* header, size_t, void* data, size_t length, const ucp_am_recv_param_t* p) {
  uint64_t step;
  std::memcpy(&step, header, sizeof step);
  Side& r = *g_recv;
  char* slot = r.slots + (step % g_run.window) * g_run.bytes;
  uint8_t* flag = &r.arrived[step % g_run.window];
  if (p->recv_attr & UCP_AM_RECV_ATTR_FLAG_RNDV) {
    ucp_request_param_t rp{};
    rp.op_attr_mask = UCP_OP_ATTR_FIELD_CALLBACK | UCP_OP_ATTR_FIELD_USER_DATA;
    rp.cb.recv_am = flagDoneAmRecv;
    rp.user_data = flag;
    ucs_status_ptr_t req = ucp_am_recv_data_nbx(r.w->worker(), data, slot, length, &rp);
    if (req == nullptr) *flag = 1;
    else if (UCS_PTR_IS_ERR(req)) die("ucp_am_recv_data_nbx", UCS_PTR_STATUS(req));
    return UCS_OK;
  }
  std::memcpy(slot, data, length);
  *flag = 1;
  return UCS_OK;
}

ucs_status_t onPutDone(void*, const void* header, size_t, void*, size_t, const ucp_am_recv_param_t*) {
  uint64_t step;
  std::memcpy(&step, header, sizeof step);
  g_recv->arrived[step % g_run.window] = 1;
  return UCS_OK;
}

ucs_status_t onCredit(void*, const void* header, size_t, void*, size_t, const ucp_am_recv_param_t*) {
  uint64_t upTo;
  std::memcpy(&upTo, header, sizeof upTo);
  if (upTo > g_send->credited) g_send->credited = upTo;
  return UCS_OK;
}

void setHandler(UcxWorker& w, unsigned id, ucp_am_recv_callback_t cb) {
  ucp_am_handler_param_t hp{};
  hp.field_mask = UCP_AM_HANDLER_PARAM_FIELD_ID | UCP_AM_HANDLER_PARAM_FIELD_CB | UCP_AM_HANDLER_PARAM_FIELD_FLAGS;
  hp.id = id;
  hp.cb = cb;
  hp.flags = UCP_AM_FLAG_WHOLE_MSG;
  ucs_status_t st = ucp_worker_set_am_recv_handler(w.worker(), &hp);
  if (st != UCS_OK) die("ucp_worker_set_am_recv_handler", st);
}

// Sends the 8-byte header `value` as an active message without data; waits for nothing.
void sendSmallAm(Side& s, unsigned id, uint64_t value) {
  auto* hdr = new uint64_t(value);  // the header must live until the send completes
  ucp_request_param_t p{};
  p.op_attr_mask = UCP_OP_ATTR_FIELD_CALLBACK | UCP_OP_ATTR_FIELD_USER_DATA;
  p.user_data = hdr;
  p.cb.send = [](void* req, ucs_status_t st, void* user) {
    if (st != UCS_OK) die("small active message", st);
    delete static_cast<uint64_t*>(user);
    ucp_request_free(req);
  };
  ucs_status_ptr_t req = ucp_am_send_nbx(s.ep, id, hdr, sizeof *hdr, nullptr, 0, &p);
  if (req == nullptr) delete hdr;
  else if (UCS_PTR_IS_ERR(req)) die("ucp_am_send_nbx", UCS_PTR_STATUS(req));
}

void postTagRecv(Side& r, uint64_t step) {
  ucp_request_param_t p{};
  p.op_attr_mask = UCP_OP_ATTR_FIELD_CALLBACK | UCP_OP_ATTR_FIELD_USER_DATA;
  p.cb.recv = flagDoneRecv;
  uint8_t* flag = &r.arrived[step % g_run.window];
  p.user_data = flag;
  ucs_status_ptr_t req = ucp_tag_recv_nbx(r.w->worker(), r.slots + (step % g_run.window) * g_run.bytes, g_run.bytes,
                                          step, ~uint64_t{0}, &p);
  if (req == nullptr) *flag = 1;
  else if (UCS_PTR_IS_ERR(req)) die("ucp_tag_recv_nbx", UCS_PTR_STATUS(req));
}

void receiverLoop(Side& r, std::atomic<bool>& stop) {
  const Run& run = g_run;
  if (run.path == Path::Tag)
    for (uint64_t s = 0; s < run.window && s < run.steps; ++s) postTagRecv(r, s);
  while (r.nextCredit < run.steps && !stop.load(std::memory_order_relaxed)) {
    ucp_worker_progress(r.w->worker());
    uint64_t before = r.nextCredit;
    while (r.nextCredit < run.steps && r.arrived[r.nextCredit % run.window]) {
      r.arrived[r.nextCredit % run.window] = 0;
      uint64_t step = r.nextCredit++;
      if (run.path == Path::Tag && step + run.window < run.steps) postTagRecv(r, step + run.window);
    }
    if (r.nextCredit != before) sendSmallAm(r, kCreditAm, r.nextCredit);
  }
  // Let the last credit leave before the sender stops progressing.
  for (int i = 0; i < 1000; ++i) ucp_worker_progress(r.w->worker());
}

void senderLoop(Side& s) {
  const Run& run = g_run;
  uint64_t next = 0;
  while (s.credited < run.steps) {
    ucp_worker_progress(s.w->worker());
    while (s.completed < next && s.sendDone[s.completed % run.window]) s.sendDone[s.completed++ % run.window] = 0;
    // A slot is free once its previous step was both sent and credited.
    while (next < run.steps && next < s.credited + run.window && next < s.completed + run.window) {
      char* slot = s.slots + (next % run.window) * run.bytes;
      uint8_t* flag = &s.sendDone[next % run.window];
      ucp_request_param_t p{};
      p.op_attr_mask = UCP_OP_ATTR_FIELD_CALLBACK | UCP_OP_ATTR_FIELD_USER_DATA;
      p.cb.send = flagDone;
      p.user_data = flag;
      ucs_status_ptr_t req = nullptr;
      static uint64_t headers[1024];
      uint64_t* hdr = &headers[next % run.window];  // lives until the slot is reused, after completion
      *hdr = next;
      if (run.path == Path::Tag) {
        req = ucp_tag_send_nbx(s.ep, slot, run.bytes, next, &p);
      } else if (run.path == Path::Am) {
        req = ucp_am_send_nbx(s.ep, kDataAm, hdr, sizeof *hdr, slot, run.bytes, &p);
      } else {
        req = ucp_put_nbx(s.ep, slot, run.bytes, s.remoteBase + (next % run.window) * run.bytes, s.rkey, &p);
        if (!UCS_PTR_IS_ERR(req)) {
          ucs_status_t st = ucp_worker_fence(s.w->worker());
          if (st != UCS_OK) die("ucp_worker_fence", st);
          sendSmallAm(s, kPutDoneAm, next);
        }
      }
      if (req == nullptr) *flag = 1;
      else if (UCS_PTR_IS_ERR(req)) die("send", UCS_PTR_STATUS(req));
      ++next;
    }
  }
  while (s.completed < run.steps) {
    ucp_worker_progress(s.w->worker());
    while (s.completed < run.steps && s.sendDone[s.completed % run.window]) s.sendDone[s.completed++ % run.window] = 0;
  }
}

double runOnce(Side& s, Side& r) {
  std::atomic<bool> stop{false};
  s.credited = s.completed = 0;
  r.nextCredit = 0;
  std::fill(s.sendDone.begin(), s.sendDone.end(), 0);
  std::fill(r.arrived.begin(), r.arrived.end(), 0);
  auto t0 = std::chrono::steady_clock::now();
  std::thread rt([&] { receiverLoop(r, stop); });
  senderLoop(s);
  auto t1 = std::chrono::steady_clock::now();
  stop = true;
  rt.join();
  return std::chrono::duration<double>(t1 - t0).count();
}

// Seconds for `steps` slots of `bytes` through a NET connector of `window` slots.
double connectorRun(occl::transport::net::NetFactory& a, occl::transport::net::NetFactory& b, uint64_t collId,
                    size_t bytes, uint32_t window, uint64_t steps) {
  using occl::transport::ConnectorEnd;
  const occl::transport::ConnectorKey key{collId, 0, 1, 0};
  auto s = a.attach(key, ConnectorEnd::Sender, window, bytes);
  auto r = b.attach(key, ConnectorEnd::Receiver, window, bytes);
  if (!s.ok() || !r.ok()) {
    std::fprintf(stderr, "occl-net-paths: %s\n", (s.ok() ? r.status() : s.status()).message.c_str());
    std::exit(1);
  }
  occl::FifoHandle hs{s.value()->header(), s.value()->data(), window, 0, bytes};
  occl::FifoHandle hr{r.value()->header(), r.value()->data(), window, 0, bytes};
  auto t0 = std::chrono::steady_clock::now();
  std::thread receiver([&] {
    for (uint64_t i = 0; i < steps; ++i) {
      while (!hr.canRecv()) std::this_thread::yield();
      hr.commitRecv();
    }
  });
  for (uint64_t i = 0; i < steps; ++i) {
    while (!hs.canSend()) std::this_thread::yield();
    hs.commitSend(bytes);
  }
  receiver.join();
  double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  if (hs.poisonStatus() != 0 || hr.poisonStatus() != 0) {
    std::fprintf(stderr, "occl-net-paths: the connector was poisoned\n");
    std::exit(1);
  }
  return seconds;
}

}  // namespace

int main(int argc, char** argv) {
  UcxOptions opts;
  opts.tls = "tcp";
  opts.extraFeatures = UCP_FEATURE_TAG | UCP_FEATURE_RMA;
  int windowArg = 4;
  uint64_t minBytes = 8, maxBytes = 64u << 20, factor = 4;
  const std::vector<occl::cli::Flag> flags = {
      {'\0', "tls", "LIST", "UCX_TLS for both workers, default tcp",
       [&opts](std::string_view v) -> std::string {
         if (v.empty()) return "a UCX transport list (tcp, rc, ...)";
         opts.tls = std::string(v);
         return "";
       }},
      {'\0', "window", "W", "messages in flight, default 4",
       [&windowArg](std::string_view v) { return occl::cli::intInRange(v, 1, 1024, windowArg); }},
      {'\0', "min", "B", "smallest message, default 8", occl::cli::bytesAtLeast(minBytes, 1)},
      {'\0', "max", "B", "largest message, default 64M", occl::cli::bytesAtLeast(maxBytes, 1)},
      {'\0', "factor", "F", "size step factor, default 4", occl::cli::bytesAtLeast(factor, 2)},
  };
  const occl::cli::Parsed parsed = occl::cli::parse(std::vector<std::string>(argv + 1, argv + argc), flags);
  if (parsed.help || parsed.version) {
    std::printf("%s", parsed.version ? (occl::cli::versionLine("occl-net-paths") + "\n").c_str()
                                     : ("usage: occl-net-paths [flags]\n" + occl::cli::usage(flags)).c_str());
    return 0;
  }
  std::string error = parsed.error;
  if (error.empty() && !parsed.positionals.empty()) error = "unexpected argument \"" + parsed.positionals[0] + "\"";
  if (error.empty() && maxBytes < minBytes) error = "--max must not be below --min";
  if (!error.empty()) {
    std::fprintf(stderr, "occl-net-paths: %s\nusage: occl-net-paths [flags]   (--help lists them)\n", error.c_str());
    return 2;
  }
  const auto window = static_cast<uint32_t>(windowArg);
  Side s, r;
  for (Side* side : {&s, &r}) {
    auto w = UcxWorker::create(opts);
    if (!w.ok()) {
      std::fprintf(stderr, "occl-net-paths: %s\n", w.status().message.c_str());
      return 1;
    }
    side->w = std::move(w.value());
    side->slots = static_cast<char*>(mmap(nullptr, window * maxBytes, PROT_READ | PROT_WRITE,
                                          MAP_PRIVATE | MAP_ANONYMOUS, -1, 0));
    std::memset(side->slots, 0x5a, window * maxBytes);
    side->arrived.assign(window, 0);
    side->sendDone.assign(window, 0);
  }
  g_send = &s;
  g_recv = &r;
  auto noError = [](void*, ucp_ep_h, ucs_status_t st) { die("endpoint", st); };
  s.ep = s.w->connect(r.w->address(), noError, nullptr).value();
  r.ep = r.w->connect(s.w->address(), noError, nullptr).value();
  setHandler(*r.w, kDataAm, onData);
  setHandler(*r.w, kPutDoneAm, onPutDone);
  setHandler(*s.w, kCreditAm, onCredit);
  // The receiver's slots as put target.
  ucp_mem_map_params_t mp{};
  mp.field_mask = UCP_MEM_MAP_PARAM_FIELD_ADDRESS | UCP_MEM_MAP_PARAM_FIELD_LENGTH;
  mp.address = r.slots;
  mp.length = window * maxBytes;
  ucs_status_t st = ucp_mem_map(r.w->context(), &mp, &r.memh);
  if (st != UCS_OK) die("ucp_mem_map", st);
  void* packed = nullptr;
  size_t packedLen = 0;
  st = ucp_rkey_pack(r.w->context(), r.memh, &packed, &packedLen);
  if (st != UCS_OK) die("ucp_rkey_pack", st);
  st = ucp_ep_rkey_unpack(s.ep, packed, &s.rkey);
  if (st != UCS_OK) die("ucp_ep_rkey_unpack", st);
  ucp_rkey_buffer_release(packed);
  s.remoteBase = reinterpret_cast<uint64_t>(r.slots);

  // The connector's two ranks.
  std::vector<std::unique_ptr<occl::transport::net::NetFactory>> net;
  for (int rank = 0; rank < 2; ++rank) {
    occl::transport::net::NetOptions no;
    no.rank = rank;
    no.nRanks = 2;
    no.tls = opts.tls;
    auto f = occl::transport::net::makeNetFactory(no);
    if (!f.ok()) {
      std::fprintf(stderr, "occl-net-paths: %s\n", f.status().message.c_str());
      return 1;
    }
    net.push_back(std::move(f.value()));
  }
  for (auto& f : net) {
    occl::Status st2 = f->connect({net[0]->localAddress(), net[1]->localAddress()});
    if (!st2.ok()) {
      std::fprintf(stderr, "occl-net-paths: %s\n", st2.message.c_str());
      return 1;
    }
  }
  uint64_t collId = 1;

  std::printf("UCX_TLS=%s, window %u slots; per path: microseconds per message | GB/s\n\n", opts.tls.c_str(), window);
  std::printf("| bytes | tag us | tag GB/s | am us | am GB/s | put us | put GB/s | connector us | connector GB/s |\n");
  std::printf("|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n");
  std::vector<size_t> sizes;
  for (size_t bytes = minBytes; bytes <= maxBytes; bytes *= factor) sizes.push_back(bytes);
  if (sizes.back() != maxBytes) sizes.push_back(maxBytes);
  for (size_t bytes : sizes) {
    // About 256 MiB or 2000 messages per measurement, whichever is fewer, at least 20.
    uint64_t steps = std::max<uint64_t>(20, std::min<uint64_t>(2000, (256u << 20) / bytes));
    std::printf("| %zu |", bytes);
    for (Path path : {Path::Tag, Path::Am, Path::Put}) {
      g_run = Run{path, bytes, window, std::max<uint64_t>(window, steps / 10)};
      runOnce(s, r);  // warm-up: connections, registration caches
      g_run.steps = steps;
      double best = 1e30;
      for (int rep = 0; rep < 3; ++rep) best = std::min(best, runOnce(s, r));
      double us = best * 1e6 / steps;
      std::printf(" %.2f | %.3f |", us, bytes * steps / best / 1e9);
      std::fflush(stdout);
    }
    connectorRun(*net[0], *net[1], collId++, bytes, window, std::max<uint64_t>(window, steps / 10));
    double best = 1e30;
    for (int rep = 0; rep < 3; ++rep) best = std::min(best, connectorRun(*net[0], *net[1], collId++, bytes, window, steps));
    std::printf(" %.2f | %.3f |", best * 1e6 / steps, bytes * steps / best / 1e9);
    std::printf("\n");
  }
  ucp_rkey_destroy(s.rkey);
  ucp_mem_unmap(r.w->context(), r.memh);
  s.w->close(s.ep, 0);
  r.w->close(r.ep, 0);
  return 0;
}
