// TCP bootstrap: the rendezvous of the ranks of a communicator, the small collectives that
// communicator init needs (allGather, barrier), and fail-fast detection of dead peers.
//
// Topology is a star: every rank connects to rank 0 (the root), which listens on the address
// carried by the unique id. Connections stay open for the life of the communicator: a peer
// process that dies closes its socket, the kernel tells the root, and the root tells everyone
// else (Gloo-style fail fast). An orderly close() says goodbye first, so it is not a failure.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <type_traits>
#include <vector>

#include "bootstrap/group.hpp"
#include "absl/container/flat_hash_map.h"
#include "bootstrap/socket.hpp"
#include "bootstrap/status_board.hpp"
#include "occl/occl.h"
#include "util/status.hpp"

namespace occl::bootstrap {

// High 16 bits "oc", low 16 bits the bootstrap protocol version: ids and peers of another
// version are rejected with a message instead of misparsed.
inline constexpr uint32_t kBootstrapMagicVersion = 0x6f630001;

// What occlGetUniqueId packs into occlUniqueId::internal. Plain bytes: it crosses processes.
struct UniqueIdData {
  // Rank 0 binds the wildcard address at `port` itself (MASTER_ADDR/MASTER_PORT style) instead
  // of taking over the listener that createUniqueId left in this process.
  static constexpr uint32_t kBindAny = 1;

  uint32_t magicVersion = 0;
  uint32_t flags = 0;
  uint64_t nonce = 0;    // random per id (kBindAny: derived); name shm with Bootstrap::nonce()
  uint16_t family = 0;   // AF_INET or AF_INET6
  uint16_t port = 0;     // host byte order
  uint32_t scopeId = 0;  // IPv6 scope (link-local addresses)
  uint8_t addr[16] = {}; // network byte order; the first 4 bytes for IPv4

  SockAddr rootAddress() const;
  void setRootAddress(const SockAddr& address);
};
static_assert(std::is_trivially_copyable_v<UniqueIdData>);
static_assert(sizeof(UniqueIdData) <= OCCL_UNIQUE_ID_BYTES, "UniqueIdData must fit in occlUniqueId");

void packUniqueId(const UniqueIdData& data, occlUniqueId* id);
// Fails with occlInvalidArgument when the bytes were not made by this version of occl.
Result<UniqueIdData> unpackUniqueId(const occlUniqueId& id);

// Binds the root listener on an ephemeral port (see listenAddressCandidates() for the address)
// and keeps it in a process-wide table keyed by nonce until rank 0's Bootstrap takes it, so
// ranks may connect before rank 0 calls Bootstrap::connect (as with ncclGetUniqueId).
Result<UniqueIdData> createUniqueId();
// Closes the listener createUniqueId left in this process for `id`, if no Bootstrap took it.
void discardUniqueId(const UniqueIdData& id);
// An id for a launcher-provided address (MASTER_ADDR/MASTER_PORT, OCCL_COMM_ID): rank 0 binds
// `port` on all interfaces, the others connect to `host`. Every rank must pass the same
// nonceSeed; the nonce ranks finally agree on (Bootstrap::nonce) is chosen at random by rank 0.
Result<UniqueIdData> uniqueIdFromAddress(const std::string& host, int port, uint64_t nonceSeed);

namespace detail {
// For Bootstrap: the listener createUniqueId left in this process, or a fresh one bound to the
// id's address (the wildcard for kBindAny ids).
Result<Socket> takeRootListener(const UniqueIdData& id);
uint64_t randomNonce();
}  // namespace detail

using FailureCallback = std::function<void(int rank, const std::string& why)>;

struct Link;  // one connection of the bootstrap: link.hpp, private to its sources

class Bootstrap final : public Group {
 public:
  // Rendezvous of `nranks` ranks, bounded by timeoutMs, which also bounds every later
  // allGather/barrier. Errors name the rank, the address and the cause: occlTimeout (root not
  // reachable, ranks missing), occlInvalidUsage (nranks mismatch, duplicate rank, bad magic or
  // nonce), occlInvalidArgument (bad arguments), occlSystemError.
  static Result<std::unique_ptr<Bootstrap>> connect(const UniqueIdData& id, int rank, int nranks,
                                                    int64_t timeoutMs);
  ~Bootstrap() override;
  Bootstrap(const Bootstrap&) = delete;
  Bootstrap& operator=(const Bootstrap&) = delete;

  int rank() const override { return rank_; }
  int size() const override { return nranks_; }
  // The nonce all ranks agreed on: the id's nonce, or rank 0's random one for kBindAny ids.
  uint64_t nonce() const override { return nonce_; }
  // This rank's end of its bootstrap connection (the root: its listener), i.e. an address of
  // an interface that reaches the other ranks; transports may advertise it.
  const SockAddr& localAddress() const { return localAddress_; }

  // Collectives for communicator init; all ranks call them in the same order. In place: rank
  // r's bytes are at data + r * bytesPerRank. A mismatch of order or size across ranks fails
  // every rank with occlInvalidUsage; a dead peer with occlRemoteError. After one failure the
  // bootstrap stays failed.
  Status allGather(void* data, size_t bytesPerRank) override;
  Status barrier() override;

  // The status board (status_board.hpp, bootstrap_board.cpp): the root gathers the tables, leaves
  // send their deltas and keepalives from the monitor thread and ask the root. After a failure
  // (the root half-closes every connection) a leaf's query is unanswered.
  void setBoardSource(BoardSource source) override;
  BoardView queryBoard(std::span<const uint64_t> keys, int64_t timeoutMs) override;

  // Called once, from the monitor thread (or from here if a failure already happened), with the
  // failed rank (-1 if unknown) and a message. It may call close() but must not destroy this.
  void setFailureCallback(FailureCallback callback);
  // Orderly shutdown: says goodbye to the peers (so they do not report a failure) and stops the
  // monitor. Idempotent; the destructor calls it.
  Status close();
  // Shutdown that the peers must hear about: their failure callbacks fire with this rank and
  // "rank r aborted: <why>" (the root forwards it to everyone). For occlCommAbort.
  Status abort(const std::string& why);

 private:
  struct PendingHello;
  enum class Op : uint32_t;

  Bootstrap(int rank, int nranks, int64_t timeoutMs);
  Status rendezvousAsRoot(const UniqueIdData& id, Deadline deadline);
  Status rendezvousAsLeaf(const UniqueIdData& id, Deadline deadline);
  Status acceptRanks(Socket& listener, uint64_t idNonce, std::vector<Link*>& byRank, Deadline deadline);
  // True: the rank joined; false: a stranger, refused (the rendezvous goes on); an error: the job
  // cannot start (a rank of it with a wrong nranks, a rank out of range, a rank claimed twice).
  Result<bool> admit(PendingHello& conn, uint64_t idNonce, std::vector<Link*>& byRank);
  // Logs a refused connection (util/log.hpp) and remembers it for a timeout's message.
  void refuse(const Socket& socket, const std::string& why);
  Status missingRanksError(const std::vector<Link*>& byRank, int joined) const;
  Link* addLink(int peer, Socket socket, const std::string& address);

  Status collective(Op op, void* data, size_t bytesPerRank);
  Status rootCollective(Op op, uint32_t seq, char* data, size_t bytes, Deadline deadline);
  Status leafCollective(Op op, uint32_t seq, char* data, size_t bytes, Deadline deadline);
  Result<Frame> waitFrame(Link& link, Deadline deadline);
  void broadcastError(const Status& status);

  // Frame types of the status board (bootstrap_board.cpp); the others are in bootstrap.cpp.
  enum BoardFrame : uint32_t { kBoardDelta = 8, kBoardAlive = 9, kBoardQuery = 10, kBoardAnswer = 11 };
  static bool isBoardFrame(uint32_t type) { return type >= kBoardDelta && type <= kBoardAnswer; }
  // On the monitor thread: every kBoardTickMs, and for each board frame that arrives.
  void boardTick();
  void boardFrame(Link& link, Frame frame);
  // This rank's table from its source (false: none, or not now); the root's (or a group of
  // one's) own table into the gathered one.
  bool readSource(std::vector<BoardEntry>& entries);
  void refreshOwnTable(int64_t now);
  // Sends a board frame from the monitor thread only if it cannot block it: the link's lock is
  // free and its socket has room (a stopped peer stops reading; its board frames are dropped).
  void sendBoardFrame(Link& link, uint32_t type, const std::vector<char>& payload);

  void monitorLoop();
  void serviceLink(Link& link);
  void dispatch(Link& link, Frame frame);
  void onLinkClosed(Link& link, const std::string& why);
  void reportFailure(int rank, const std::string& why);
  void propagateFailure(int rank, const std::string& why);
  Status finish(uint32_t farewell, const std::vector<char>& note);

  const int rank_;
  const int nranks_;
  const int64_t timeoutMs_;
  uint64_t nonce_ = 0;
  SockAddr localAddress_;
  // Root: the connections refused during the rendezvous, "address why", the first few of them.
  static constexpr size_t kMaxRefusedNamed = 4;
  std::vector<std::string> refused_;
  std::vector<std::unique_ptr<Link>> links_;  // root: one per other rank; leaf: the root

  std::mutex opMu_;      // serialises allGather/barrier
  uint32_t opSeq_ = 0;   // guarded by opMu_
  std::optional<Status> opError_;  // sticky collective failure, guarded by opMu_

  std::mutex mu_;  // guards the fields below and each Link's inbox/flags
  std::condition_variable cv_;
  std::optional<Status> failure_;  // a peer died: every later wait fails with this
  int failedRank_ = -1;
  bool closing_ = false;
  FailureCallback callback_;
  bool callbackFired_ = false;

  std::atomic<bool> closed_{false};
  std::atomic<bool> stopping_{false};
  int wakeFd_ = -1;  // eventfd that interrupts the monitor's poll

  // Status board. The table (the root's: every rank's; a leaf's: its own only, for nranks 1).
  std::mutex boardMu_;  // guards board_, answers_, lastQueryUnanswered_
  BoardTable board_;
  std::mutex sourceMu_;  // held while the source runs, so that setBoardSource waits for it
  BoardSource source_;
  BoardSender sender_;         // monitor thread only
  int64_t lastBoardSendMs_ = 0;  // monitor thread only: a leaf's last delta, the root's last keepalive
  std::atomic<int64_t> rootHeardMs_{0};  // a leaf: when a frame last came from the root
  std::atomic<uint64_t> nextQueryId_{0};
  absl::flat_hash_map<uint64_t, std::vector<char>> answers_;  // a leaf: answers not yet taken
  bool lastQueryUnanswered_ = false;  // and nothing came from the root since: ask no more
  std::condition_variable answerCv_;

  std::thread monitor_;
};

}  // namespace occl::bootstrap
