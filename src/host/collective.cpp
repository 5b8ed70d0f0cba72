#include "host/collective.hpp"

#include <algorithm>
#include <cstring>
#include <limits>
#include <string_view>

#include "absl/strings/str_format.h"
#include "device/coll_types.hpp"
#include "host/algorithms.hpp"
#include "host/config.hpp"
#include "ir_loader/validate.hpp"
#include "device/dtypes.hpp"
#include "primitives/peer_read.hpp"
#include "primitives/reduce_ops.hpp"
#include "queues/sq.hpp"
#include "util/cache_size.hpp"
#include "util/fnv1a.hpp"

namespace occl::host {
namespace {

DeviceStep flatten(const ir::Step& s) {
  DeviceStep d{};
  d.op = s.op;
  d.srcBuf = s.srcBuf;
  d.dstBuf = s.dstBuf;
  d.flags = static_cast<uint8_t>((s.hasDep ? kStepHasDep : 0) | (s.postOp ? kStepPostOp : 0));
  d.srcOff = s.srcOff;
  d.dstOff = s.dstOff;
  d.count = s.count;
  d.depBlock = static_cast<int16_t>(s.depBlock);  // validated: < kMaxDaemonBlocks, < kMaxStepsPerBlock
  d.depStep = static_cast<int16_t>(s.depStep);
  d.sendConn = kNoConnector;
  d.recvConn = kNoConnector;
  return d;
}

// Position of `peer` in a block's connector list (connectionPeers() lists every peer its steps use).
uint16_t indexOf(const std::vector<int32_t>& peers, int32_t peer) {
  return static_cast<uint16_t>(std::find(peers.begin(), peers.end(), peer) - peers.begin());
}

// The peer's registration is known only as a hash, so the message lists what must match and what
// this rank registered, for the user to compare with the peer's.
std::string mismatchMessage(uint64_t collId, const occlCollDesc_t& d, int peer) {
  return absl::StrFormat("collId 0x%x: rank %d registered it differently (type, count, datatype, op, root, "
                         "sharedBuffers, variableCount, vectorCounts, algorithm and blocks must match on every rank); "
                         "this rank registered %s count=%d datatype=%s op=%s root=%d sharedBuffers=%d variableCount=%d "
                         "vectorCounts=%d",
                         collId, peer, collTypeName(d.type), d.count, dtypeName(d.datatype), ops::opName(d.op), d.root,
                         d.sharedBuffers, d.variableCount, d.vectorCounts);
}

// A program's threadblocks index CollShared::progress and the per-part arrays.
static_assert(ir::kMaxBlocksPerRank <= kMaxDaemonBlocks, "every part of a program needs a progress word");

// Slots of `written` bytes, in the unit of config.connectorSlotBytes (occl.h: a multiple of 64).
uint64_t slotBytesFor(uint64_t written) {
  constexpr uint64_t kUnit = 64;
  return (std::max<uint64_t>(written, 1) + kUnit - 1) / kUnit * kUnit;
}

// A tile's bytes. On a kernel backend the parts of a collective split by size share its slot
// bytes, down to an eighth each (partsFor gives a part at least an eighth of a slot of data): a
// 64 MiB AllReduce of 16 parts on 4 ranks then holds 16 MiB of connectors per rank with 1 MiB
// slots, where 16 whole slots a part held 128 MiB (8 MiB in one part). Whole lines, at least one.
uint64_t tileBytes(uint64_t slotBytes, uint32_t parts, bool kernel) {
  if (!kernel) return slotBytes;
  const uint64_t share = std::clamp<uint64_t>(parts, 1, kSlotShareOfAPart);
  return std::max<uint64_t>(slotBytes / share / 64 * 64, 64);
}

FifoHandle handleOf(const transport::ConnectorMemory& m, uint32_t nSlots, uint64_t slotBytes) {
  return FifoHandle{m.header(), m.data(), nSlots, 0, slotBytes};
}

}  // namespace

Result<std::unique_ptr<Collective>> Collective::create(const CollectiveSetup& setup, uint64_t collId, uint32_t index,
                                                       const occlCollDesc_t& user, const ResolvedOp& resolved) {
  std::unique_ptr<Collective> c(new Collective());
  c->desc_.collId = collId;
  c->desc_.collIndex = index;
  c->desc_.preMulScalar = resolved.scalar.bits;
  c->desc_.preMulScalarPtr = resolved.scalar.address;
  c->backend_ = setup.backend;
  if (Status s = c->build(setup, resolved.desc); !s.ok()) return s;
  c->user_.op = user.op;
  return c;
}

Status Collective::build(const CollectiveSetup& setup, const occlCollDesc_t& desc) {
  user_ = desc;
  user_.algorithm = nullptr;  // the caller's string need not outlive registration: kept below
  requestedAlgorithm_ = desc.algorithm != nullptr ? desc.algorithm : "";
  requestedAlgorithmHash_ = Fnv1a().add(std::string_view(requestedAlgorithm_)).value();
  const occlConfig_t& cfg = *setup.config;
  if (desc.sharedBuffers == 1 && std::string_view(setup.backend->name()) != "host")
    return Status::error(occlInvalidArgument, "desc.sharedBuffers = 1 needs the host backend: occlMemAlloc memory is "
                                              "host memory, which this rank's daemon cannot use");
  // Processes of one host reach each other's buffers only when they come from occlMemAlloc.
  const PeerAccess peer = setup.peerReads                                  ? PeerAccess::InProcess
                          : desc.sharedBuffers == 1 && setup.peerShared ? PeerAccess::Processes
                                                                          : PeerAccess::None;
  const PartsRule parts{cfg.daemonBlocks, setup.backend->daemonIsKernel(), cfg.connectorSlotBytes};
  Result<AlgorithmChoice> choice = selectAlgorithm(desc, setup.rank, setup.nRanks, parts, peer, *setup.library);
  if (!choice.ok()) return choice.status();
  const auto& forms = choice.value().forms;
  uint32_t nBlocks = 0;
  const ir::Program* widest = forms[0].get();  // the form with the most threadblocks, for messages
  for (uint32_t f : {kFormOutOfPlace, kFormInPlace}) {
    algorithmNames_[f] = forms[f]->name;
    const auto blocks = static_cast<uint32_t>(forms[f]->ranks.at(setup.rank).blocks.size());
    if (blocks > nBlocks) widest = forms[f].get();
    nBlocks = std::max(nBlocks, blocks);
  }
  // The daemon would never pick up a submission with no block, so its callback would never fire.
  if (nBlocks == 0)
    return Status::error(occlInvalidArgument, absl::StrFormat("algorithm %s gives rank %d no part in %s",
                                                              forms[0]->name, setup.rank, collTypeName(desc.type)));
  // More parts than daemon blocks: a block runs several (daemonParts()), moving to another when
  // one waits. Without preemption it would wait forever on the part it has not run yet; and all of
  // a submission's parts enter a block's task queue together.
  const auto daemonBlocks = static_cast<uint32_t>(cfg.daemonBlocks);
  if (nBlocks > daemonBlocks && cfg.disablePreemption)
    return Status::error(occlInvalidArgument,
                         absl::StrFormat("algorithm %s gives rank %d %d threadblocks, more than config.daemonBlocks = %d, "
                                         "which needs preemption; config.disablePreemption is set",
                                         widest->name, setup.rank, nBlocks, daemonBlocks));
  line_.tasks = daemonParts(nBlocks, daemonBlocks, 0);
  if (line_.tasks > static_cast<uint32_t>(cfg.taskQueueDepth))
    return Status::error(occlInvalidArgument,
                         absl::StrFormat("algorithm %s gives a daemon block %d threadblocks to run; "
                                         "config.taskQueueDepth = %d holds fewer",
                                         widest->name, line_.tasks, cfg.taskQueueDepth));

  // Sizes, overflow-checked; the chunk geometry is per form.
  const uint64_t elemBytes = dtypeSize(desc.datatype);
  const uint64_t mult = ir::chunkMultiplier(forms[0]->coll, setup.nRanks);
  if (desc.count > std::numeric_limits<uint64_t>::max() / 8 / mult / elemBytes)
    return Status::error(occlInvalidArgument, absl::StrFormat("desc.count = %d overflows the buffer size", desc.count));
  // A submission's count crosses to the daemon in the SQE's 44 bits (SqeView::count).
  if ((desc.variableCount == 1 || desc.vectorCounts == 1) && desc.count > sqe::kMaxCount)
    return Status::error(occlInvalidArgument,
                         absl::StrFormat("desc.count = %d: with desc.%s the count is at most %d", desc.count,
                                         desc.variableCount == 1 ? "variableCount" : "vectorCounts", sqe::kMaxCount));
  rank_ = setup.rank;

  desc_.signature = registrationSignature(desc, setup.rank, setup.nRanks, choice.value(),
                                          static_cast<uint32_t>(cfg.connectorSlots), cfg.connectorSlotBytes);
  desc_.dtype = static_cast<uint8_t>(desc.datatype);
  // Copies dispatch on (dtype, op) too, so an op a non-reducing collective ignores must not stay invalid.
  desc_.redOp = static_cast<uint8_t>(collInfo(desc.type).reduces ? desc.op : occlSum);
  desc_.collType = static_cast<uint8_t>(desc.type);
  desc_.peerShared = peer == PeerAccess::Processes && (forms[0]->peerReads || forms[1]->peerReads) ? 1 : 0;
  static_assert(ir::kMaxBlocksPerRank < (1 << sqe::kPartBits), "an SQE names a collective's parts in 8 bits (SqeView::nParts)");
  static_assert(CollTable::kMaxPages * CollTable::kPageSize <= (1u << sqe::kIndexBits),
                "an SQE names a collective's table index in 20 bits (SqeView::collIndex)");
  desc_.nBlocks = nBlocks;
  desc_.nRanks = static_cast<uint32_t>(setup.nRanks);
  desc_.totalElems = desc.count * mult;
  desc_.countMultiplier = mult;
  // A v-collective's submissions differ as a variable count's do: stamped messages, geometry per task.
  desc_.variableCount = desc.variableCount == 1 || desc.vectorCounts == 1 ? 1 : 0;
  desc_.tileElems = tileBytes(cfg.connectorSlotBytes, nBlocks, parts.bySize) / elemBytes;
  desc_.elemBytes = elemBytes;
  desc_.timeoutNs = static_cast<uint64_t>(cfg.collTimeoutMs) * 1000000ull;
  desc_.inflightWindow = static_cast<uint16_t>(cfg.maxInflightPerColl);  // validated <= kMaxInflightPerColl
  desc_.priority = desc.priority;
  desc_.peerStream = peerCopiesStream(desc_.nRanks, desc_.totalElems * elemBytes, lastLevelCacheBytes()) ? 1 : 0;

  // The small form runs on the out-of-place form's connectors, which must hold its messages too.
  const ir::Program* small = choice.value().small.get();
  if (small != nullptr) {
    desc_.smallCount = choice.value().smallCount;
    smallAlgorithm_ = small->name;
    shared_ = smallFormNeeds(setup, *small);
  }
  for (uint32_t f : {kFormOutOfPlace, kFormInPlace}) {
    if (f == kFormInPlace && forms[f] == forms[kFormOutOfPlace]) {
      desc_.forms[f] = desc_.forms[kFormOutOfPlace];  // one program serves both placements
      continue;
    }
    if (Status s = buildForm(setup, desc, *forms[f], f); !s.ok()) return s;
    desc_.forms[f].nParts = nBlocks;  // an SQE of either placement names every part (nParts())
  }
  if (small != nullptr)
    if (Status s = buildSmallForm(*small); !s.ok()) return s;

  Result<void*> shared = allocDaemon(sizeof(CollShared));
  Result<void*> contexts = allocDaemon(nBlocks * sizeof(BlockContext));
  // Daemon memory: the GPU daemon bumps the statistics several times a collective, which in
  // pinned host memory cost a bus crossing each (device/simt_crossings.hpp); stats() reads them.
  Result<void*> stats = allocDaemon(nBlocks * sizeof(BlockStats));
  for (const Result<void*>* r : {&shared, &contexts, &stats})
    if (!r->ok()) return r->status();
  desc_.shared = static_cast<CollShared*>(shared.value());
  Result<void*> gates = backend_->allocShared(2 * size_t{desc_.inflightWindow} * sizeof(uint32_t));
  if (!gates.ok()) return gates.status();
  desc_.gateWords = static_cast<uint32_t*>(gates.value());
  desc_.contexts = static_cast<BlockContext*>(contexts.value());
  desc_.stats = static_cast<BlockStats*>(stats.value());
  if (desc.vectorCounts == 1) {
    Result<std::unique_ptr<VecTables>> tables =
        VecTables::create(*backend_, desc_.nRanks, desc_.inflightWindow, nBlocks);
    if (!tables.ok()) return tables.status();
    vecTables_ = std::move(tables.value());
    desc_.vecGroups = desc_.nRanks;
    desc_.vecSlots = vecTables_->slots();
    desc_.vecCache = vecTables_->cache();
  }
  fillSubmitLine(desc);
  return Status::success();
}

void Collective::fillSubmitLine(const occlCollDesc_t& desc) {
  const BufferExtents x = computeExtents(desc.count);
  line_.count = desc.count;
  line_.sendBytes = x.sendBytes;
  line_.recvBytes = x.recvBytes;
  line_.inPlaceShift = x.inPlaceShift;
  line_.index = desc_.collIndex;
  line_.window = desc_.inflightWindow;
  line_.nParts = static_cast<uint16_t>(desc_.nBlocks);
  done_.window = line_.window;
  done_.tasks = line_.tasks;
  line_.flags = static_cast<uint8_t>((vecTables_ != nullptr ? kLineVectorCounts : 0) |
                                     (desc_.variableCount != 0 ? kLineVariableCount : 0) |
                                     (desc.sharedBuffers == 1 ? kLineSharedBuffers : 0) |
                                     (x.inPlaceDefined ? kLineInPlaceDefined : 0) |
                                     (desc_.smallCount != 0 ? kLineSmallForm : 0));
}

Status Collective::buildForm(const CollectiveSetup& setup, const occlCollDesc_t& desc, const ir::Program& program,
                             uint32_t formIndex) {
  ProgramForm& form = desc_.forms[formIndex];
  // Fewer slots than the program fills before its receivers drain them would hang it inside one
  // collective, where preemption cannot help: its connectors get what it needs, config's at least.
  const int32_t slots = std::max(setup.config->connectorSlots, program.minConnectorSlots);
  if (slots > kMaxConnectorSlots)
    return Status::error(occlInvalidArgument,
                         absl::StrFormat("algorithm %s needs connectors of %d slots (it sends that many chunks on a "
                                         "connection before they are received); at most %d",
                                         program.name, program.minConnectorSlots, kMaxConnectorSlots));
  const uint64_t total = desc_.totalElems, nChunks = static_cast<uint64_t>(program.nChunksPerLoop);
  // selectAlgorithm gives a program without ragged chunks only sizes that split into whole
  // chunks; were that broken, the chunks below would reach past the user's buffers.
  if (!program.raggedChunksAllowed && total % nChunks != 0)
    return Status::error(occlInternalError, absl::StrFormat("algorithm %s was chosen for %d elements, which do not "
                                                            "split into its %d chunks",
                                                            program.name, total, nChunks));
  // The registered count's geometry: the most tiles any submission of it has.
  const ChunkGeometry g = chunkGeometry(total, static_cast<uint32_t>(nChunks), desc_.tileElems, program.peerReads,
                                        program.raggedChunksAllowed, desc_.variableCount != 0);
  const uint64_t chunkElems = g.chunkElems, nTiles = g.nTiles;
  if (nTiles >= kMaxTiles)
    return Status::error(occlInvalidArgument,
                         absl::StrFormat("desc.count = %d needs %d tiles of %d bytes; at most %d: raise "
                                         "config.connectorSlotBytes",
                                         desc.count, nTiles, desc_.tileElems * desc_.elemBytes, kMaxTiles - 1));
  form.chunkElems = chunkElems;
  form.nChunks = static_cast<uint32_t>(nChunks);
  form.nTiles = g.nTiles;
  form.ragged = g.ragged;
  form.raggedAllowed = program.raggedChunksAllowed ? 1 : 0;

  form.peerReads = program.peerReads ? 1 : 0;
  const ir::RankProgram& mine = program.ranks.at(setup.rank);
  Result<const BlockPlan*> plans = buildBlocks(setup, desc, mine, program.name, formIndex, static_cast<uint32_t>(slots));
  if (!plans.ok()) return plans.status();
  form.blocks = plans.value();
  const uint64_t scratchBytes = static_cast<uint64_t>(mine.scratchChunks) * chunkElems * desc_.elemBytes;
  if (scratchBytes > 0) {
    Result<void*> scratch = allocDaemon(scratchBytes);
    if (!scratch.ok()) return scratch.status();
    form.scratch = static_cast<char*>(scratch.value());
    scratchBytes_ += scratchBytes;
  }
  return Status::success();
}

Collective::BufferExtents Collective::computeExtents(uint64_t count) const {
  const auto [sendElems, recvElems] = userElems(user_.type, count, static_cast<int>(desc_.nRanks), rank_ == user_.root);
  const auto [sendAt, recvAt] = inPlaceOffsets(user_.type, rank_, count);
  const uint64_t eb = desc_.elemBytes;
  return {sendElems * eb, recvElems * eb, recvAt * eb - sendAt * eb, collInfo(user_.type).inPlace != InPlaceRule::None};
}

Result<void*> Collective::allocDaemon(size_t bytes) {
  Result<void*> p = backend_->allocDaemon(bytes);
  if (p.ok()) daemonAllocations_.push_back(p.value());
  return p;
}

// A registration that fails poisons every connector it attached, and gives back the memory
// behind their slots (ConnectorMemory::discard): the headers keep the poison for a peer that
// attaches later.
void Collective::failConnectors(uint32_t status) {
  for (const auto& c : connectors_) {
    (void)c->poison(status, 0);
    c->discard();
  }
}

Result<FifoHandle> Collective::attachConnector(const CollectiveSetup& setup, const occlCollDesc_t& desc, int peer,
                                               int channel, uint32_t formIndex, transport::ConnectorEnd end,
                                               uint32_t slots, uint64_t minWritten) {
  const occlConfig_t& cfg = *setup.config;
  const bool sending = end == transport::ConnectorEnd::Sender;
  const transport::ConnectorKey key{desc_.collId, sending ? setup.rank : peer, sending ? peer : setup.rank, channel,
                                    static_cast<int32_t>(formIndex)};
  // A tile is at most one chunk: that much of each slot is ever written (buildForm set the chunk);
  // a peer-read program's slots hold a notice. The slots are that big, in lines, up to
  // config.connectorSlotBytes: a small collective's connector then fits a page or two, where every
  // slot took a page of /dev/shm (or of a pinned buffer) and a registration per slot to map it in.
  // A small form's messages on it (minWritten) may be larger.
  const ProgramForm& form = desc_.forms[formIndex];
  const uint64_t written = std::max(
      form.peerReads != 0 ? sizeof(PeerNotice) : std::min(form.chunkElems, desc_.tileElems) * desc_.elemBytes, minWritten);
  const uint64_t slotBytes = form.peerReads != 0 && minWritten == 0
                                 ? kPeerSlotBytes
                                 : std::min<uint64_t>(cfg.connectorSlotBytes, slotBytesFor(written));
  auto mem = setup.connectors->attach(key, end, slots, slotBytes);
  if (!mem.ok() && mem.status().code == occlInvalidUsage) {
    // The ends disagree on the connector (its geometry, which the collective decides as much as
    // the configuration): as for a signature mismatch, with the transport's detail. (A factory's
    // other occlInvalidUsage, NET's attach before connect, cannot come through the API.)
    failConnectors(occlInvalidUsage);
    return Status::error(occlInvalidUsage, mismatchMessage(desc_.collId, desc, peer) + "; " + mem.status().message);
  }
  if (!mem.ok()) {
    failConnectors(occlSystemError);  // the peer's ends of those attached so far must fail, not wait
    return mem.status();
  }
  connectors_.push_back(mem.value());
  connectorBytes_ += fifoBytes(slots, slotBytes);
  if (setup.yieldBoard != nullptr) {  // host memory: whose word a wait on this FIFO reads
    atomics::storeRelaxed(&mem.value()->header()->senderRank, namedRank(key.sender));
    atomics::storeRelaxed(&mem.value()->header()->receiverRank, namedRank(key.receiver));
  }
  connectorSlots_ = std::max(connectorSlots_, slots);
  Result<uint64_t> peerSig = mem.value()->exchangeSignature(sending, desc_.signature);
  if (!peerSig.ok()) {
    failConnectors(occlSystemError);  // as below: the peer's end must fail, not wait
    return peerSig.status();
  }
  if (peerSig.value() != 0 && peerSig.value() != desc_.signature) {
    // This registration fails, and with it every connector it attached: poisoned, so that a peer
    // whose only link to the mismatch runs through this rank fails too instead of waiting.
    failConnectors(occlInvalidUsage);
    return Status::error(occlInvalidUsage, mismatchMessage(desc_.collId, desc, peer));
  }
  if (Status s = mem.value()->populate(end, slots, slotBytes, written); !s.ok()) {
    failConnectors(occlSystemError);  // as for a mismatch: the peer's end must fail too, not wait
    return s;
  }
  return handleOf(*mem.value(), slots, slotBytes);
}

Result<const BlockPlan*> Collective::buildBlocks(const CollectiveSetup& setup, const occlCollDesc_t& desc,
                                                 const ir::RankProgram& mine, const std::string& algorithm,
                                                 uint32_t formIndex, uint32_t slots) {
  // Per block: its steps, back to back, and its connectors (sends, then receives), back to back.
  struct Extent {
    size_t firstStep, firstConnector;
    uint32_t nSteps;
    uint16_t nSends, nRecvs;
  };
  std::vector<DeviceStep> steps;
  std::vector<FifoHandle> connectors;
  std::vector<Extent> extents;
  for (size_t b = 0; b < mine.blocks.size(); ++b) {
    const ir::BlockProgram& bp = mine.blocks[b];
    if (bp.steps.size() > kMaxStepsPerBlock)
      return Status::error(occlInvalidArgument, absl::StrFormat("algorithm %s: block %d has %d steps, at most %d",
                                                                algorithm, b, bp.steps.size(), kMaxStepsPerBlock));
    const std::vector<int32_t> sendPeers = ir::connectionPeers(bp, true), recvPeers = ir::connectionPeers(bp, false);
    peersOf_[formIndex].push_back({sendPeers, recvPeers});
    extents.push_back({steps.size(), connectors.size(), static_cast<uint32_t>(bp.steps.size()),
                       static_cast<uint16_t>(sendPeers.size()), static_cast<uint16_t>(recvPeers.size())});
    // The small form's parts run on this form's first ones (shared_).
    const bool shared = formIndex == kFormOutOfPlace && b < shared_.blocks;
    const uint32_t blockSlots = shared ? std::max(slots, shared_.slots) : slots;
    const uint64_t minWritten = shared ? shared_.written : 0;
    for (auto [peers, end] : {std::pair{&sendPeers, transport::ConnectorEnd::Sender},
                              std::pair{&recvPeers, transport::ConnectorEnd::Receiver}}) {
      for (int32_t peer : *peers) {
        Result<FifoHandle> h = attachConnector(setup, desc, peer, bp.channel, formIndex, end, blockSlots, minWritten);
        if (!h.ok()) return h.status();
        connectors.push_back(h.value());
      }
    }
    for (const ir::Step& s : bp.steps) {
      DeviceStep d = flatten(s);
      if (stepUsesSendConnector(s.op)) d.sendConn = indexOf(sendPeers, ir::sendPeerOf(bp, s));
      if (stepUsesRecvConnector(s.op)) d.recvConn = indexOf(recvPeers, ir::recvPeerOf(bp, s));
      steps.push_back(d);
    }
  }
  Result<DeviceStep*> stepMem = copyToDaemon(steps);
  Result<FifoHandle*> connectorMem = copyToDaemon(connectors);
  if (!stepMem.ok()) return stepMem.status();
  if (!connectorMem.ok()) return connectorMem.status();
  // Blocks past this form's own take no part in it (the other form has more): empty plans.
  std::vector<BlockPlan> plans(desc_.nBlocks, BlockPlan{stepMem.value(), nullptr, nullptr, 0, 0, 0});
  for (size_t b = 0; b < extents.size(); ++b) {
    const Extent& e = extents[b];
    const FifoHandle* sends = connectorMem.value() + e.firstConnector;
    plans[b] = BlockPlan{stepMem.value() + e.firstStep, sends, sends + e.nSends, e.nSteps, e.nSends, e.nRecvs};
  }
  Result<BlockPlan*> planMem = copyToDaemon(plans);
  if (!planMem.ok()) return planMem.status();
  if (formIndex == kFormOutOfPlace) outOfPlacePlans_ = std::move(plans);
  return static_cast<const BlockPlan*>(planMem.value());
}

Collective::SharedConnectors Collective::smallFormNeeds(const CollectiveSetup& setup, const ir::Program& program) const {
  const ChunkGeometry g = chunkGeometry(desc_.smallCount * desc_.countMultiplier,
                                        static_cast<uint32_t>(program.nChunksPerLoop), desc_.tileElems,
                                        program.peerReads, program.raggedChunksAllowed, /*variable=*/true);
  const uint64_t written =
      program.peerReads ? sizeof(PeerNotice) : std::min(g.chunkElems, desc_.tileElems) * desc_.elemBytes;
  return {static_cast<uint32_t>(program.ranks.at(static_cast<size_t>(rank_)).blocks.size()),
          static_cast<uint32_t>(std::max(setup.config->connectorSlots, program.minConnectorSlots)), written};
}

// The small form's steps name connectors of the out-of-place form's plans (the same handles:
// a host sender keeps its free-slot count in its FifoHandle, which two copies would each believe),
// so each step's connector index is its peer's place in that part's lists.
Status Collective::buildSmallForm(const ir::Program& program) {
  ProgramForm& form = desc_.forms[kFormSmall];
  const ChunkGeometry g = chunkGeometry(desc_.smallCount * desc_.countMultiplier,
                                        static_cast<uint32_t>(program.nChunksPerLoop), desc_.tileElems,
                                        program.peerReads, program.raggedChunksAllowed, /*variable=*/true);
  if (g.nTiles >= kMaxTiles)
    return Status::error(occlInternalError, absl::StrFormat("the small form %s of collId 0x%x needs %d tiles",
                                                            program.name, desc_.collId, g.nTiles));
  form.chunkElems = g.chunkElems;
  form.nChunks = g.nChunks;
  form.nTiles = g.nTiles;
  form.ragged = g.ragged;
  form.raggedAllowed = program.raggedChunksAllowed ? 1 : 0;
  form.peerReads = program.peerReads ? 1 : 0;
  const ir::RankProgram& mine = program.ranks.at(static_cast<size_t>(rank_));
  const std::vector<BlockPeers>& large = peersOf_[kFormOutOfPlace];
  std::vector<DeviceStep> steps;
  std::vector<size_t> firstStep;
  for (size_t b = 0; b < mine.blocks.size(); ++b) {
    const ir::BlockProgram& bp = mine.blocks[b];
    if (b >= large.size() || bp.steps.size() > kMaxStepsPerBlock)
      return Status::error(occlInternalError, absl::StrFormat("the small form %s of collId 0x%x does not fit the "
                                                              "connectors of %s",
                                                              program.name, desc_.collId, algorithmNames_[0]));
    firstStep.push_back(steps.size());
    for (const ir::Step& st : bp.steps) {
      DeviceStep d = flatten(st);
      if (stepUsesSendConnector(st.op)) d.sendConn = indexOf(large[b].sends, ir::sendPeerOf(bp, st));
      if (stepUsesRecvConnector(st.op)) d.recvConn = indexOf(large[b].recvs, ir::recvPeerOf(bp, st));
      if ((d.sendConn != kNoConnector && d.sendConn >= large[b].sends.size()) ||
          (d.recvConn != kNoConnector && d.recvConn >= large[b].recvs.size()))
        return Status::error(occlInternalError,
                             absl::StrFormat("the small form %s of collId 0x%x uses a connector %s has not",
                                             program.name, desc_.collId, algorithmNames_[0]));
      steps.push_back(d);
    }
  }
  Result<DeviceStep*> stepMem = copyToDaemon(steps);
  if (!stepMem.ok()) return stepMem.status();
  std::vector<BlockPlan> plans(desc_.nBlocks, BlockPlan{stepMem.value(), nullptr, nullptr, 0, 0, 0});
  for (size_t b = 0; b < mine.blocks.size(); ++b) {
    const BlockPlan& on = outOfPlacePlans_[b];
    plans[b] = BlockPlan{stepMem.value() + firstStep[b], on.sends, on.recvs,
                         static_cast<uint32_t>(mine.blocks[b].steps.size()), on.nSends, on.nRecvs};
  }
  Result<BlockPlan*> planMem = copyToDaemon(plans);
  if (!planMem.ok()) return planMem.status();
  form.blocks = planMem.value();
  form.nParts = static_cast<uint32_t>(mine.blocks.size());
  peersOf_[kFormSmall] = large;  // its connector indices are the out-of-place form's
  const uint64_t scratchBytes = static_cast<uint64_t>(mine.scratchChunks) * g.chunkElems * desc_.elemBytes;
  if (scratchBytes > 0) {
    Result<void*> scratch = allocDaemon(scratchBytes);
    if (!scratch.ok()) return scratch.status();
    form.scratch = static_cast<char*>(scratch.value());
    scratchBytes_ += scratchBytes;
  }
  return Status::success();
}

Collective::~Collective() {
  for (void* p : daemonAllocations_) backend_->freeDaemon(p);
  if (desc_.gateWords != nullptr) backend_->freeShared(desc_.gateWords);
}

Status Collective::publish(CollDesc* tableEntry) {
  return backend_->copyToDaemon(tableEntry, &desc_, sizeof(CollDesc));
}

std::string Collective::failurePlace(backend::Backend& backend) const {
  uint64_t word = 0;
  if (!backend.readDaemonWords(&word, reinterpret_cast<const uint64_t*>(&desc_.shared->failStatus), 1).ok()) return "";
  const auto where = static_cast<uint32_t>(word >> 32);  // CollShared::failedWhere, after failStatus
  const auto at = static_cast<FailedAt>(where >> 28);
  const uint32_t form = (where >> 26) & 3u, block = (where >> 16) & 0x3ffu, index = where & 0xffffu;
  if (at == FailedAt::Unknown) return "";
  if (at == FailedAt::OtherBlock) return absl::StrFormat(": block %d waited for this rank's block %d", block, index);
  // A form that shares the other's program (every built-in one) has no peers of its own.
  const std::vector<BlockPeers>& blocks =
      form >= kForms || peersOf_[form].empty() ? peersOf_[kFormOutOfPlace] : peersOf_[form];
  if (block >= blocks.size()) return "";
  const bool receives = at == FailedAt::Receive || at == FailedAt::PoisonedReceive || at == FailedAt::CountMismatch;
  const std::vector<int32_t>& peers = receives ? blocks[block].recvs : blocks[block].sends;
  if (index >= peers.size()) return "";
  const int32_t peer = peers[index];
  switch (at) {
    case FailedAt::Receive: return absl::StrFormat(": waiting for data from rank %d (block %d)", peer, block);
    case FailedAt::Send: return absl::StrFormat(": waiting for rank %d to take data (block %d)", peer, block);
    case FailedAt::CountMismatch: return countMismatchText(backend, peer);
    default:
      return absl::StrFormat(": rank %d failed it (it poisoned its connector %s this rank, block %d)", peer,
                             receives ? "to" : "from", block);
  }
}

std::string Collective::countMismatchText(backend::Backend& backend, int32_t peer) const {
  static_assert(offsetof(CollShared, mismatchPeerCount) == offsetof(CollShared, mismatchOwnCount) + 8,
                "the two counts are read as two words");
  uint64_t counts[2] = {0, 0};
  if (!backend.readDaemonWords(counts, &desc_.shared->mismatchOwnCount, 2).ok()) return "";
  if (vectorCounts())
    return absl::StrFormat(": rank %d sent %d elements where this rank's blocks expect %d (the ranks' counts for a "
                           "block differ; the collective stays failed: register it again)",
                           peer, counts[1], counts[0]);
  return absl::StrFormat(": this rank submitted count %d and rank %d count %d (the collective stays failed: "
                         "register it again)",
                         counts[0], peer, counts[1]);
}

Result<occlCollStats_t> Collective::stats(backend::Backend& backend) const {
  occlCollStats_t out{};
  out.submissions = line_.nextSeq.load(std::memory_order_relaxed);
  out.connectorSlots = connectorSlots_;
  out.parts = desc_.nBlocks;
  out.connectorBytes = connectorBytes_;
  out.scratchBytes = scratchBytes_;
  std::vector<BlockStats> blocks(desc_.nBlocks);
  static_assert(sizeof(BlockStats) % sizeof(uint64_t) == 0, "BlockStats is read as words");
  if (Status s = backend.readDaemonWords(reinterpret_cast<uint64_t*>(blocks.data()),
                                         reinterpret_cast<const uint64_t*>(desc_.stats),
                                         blocks.size() * sizeof(BlockStats) / sizeof(uint64_t));
      !s.ok())
    return s.withContext("reading the daemon's statistics");
  for (const BlockStats& s : blocks) {
    out.completions += s.completions;
    out.preemptions += s.preemptions;
    out.contextLoads += s.contextLoads;
    out.contextSaves += s.contextSaves;
    out.queueWaitNs += s.queueWaitNs / desc_.nBlocks;
    out.executionNs += s.executionNs / desc_.nBlocks;
  }
  return out;
}

}  // namespace occl::host
