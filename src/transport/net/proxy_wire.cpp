// What the proxy does for each connector and each message (proxy.hpp, wire.hpp).
//
// Flow control, per connector generation (nSlots slots):
//   sender   : ships step s once its daemon published it (s < local tail), and only when
//              s < credited + nSlots, i.e. the receiver's daemon consumed step s - nSlots so its
//              slot is free. The local head (below which the daemon may overwrite slots) is
//              min(sent, credited): a slot is reused only once UCX no longer reads it AND the peer
//              has room for its next occupant. The daemon publishes s only below head + nSlots,
//              so every published step is shippable at once; nothing waits for the peer's attach.
//   receiver : lands step s in slot s % nSlots (rendezvous transfers may complete out of order)
//              and publishes its tail in step order; credits its daemon's head back.
#include <cstring>

#include "absl/strings/str_format.h"
#include "transport/net/proxy.hpp"

namespace occl::transport::net {

struct Proxy::Op {
  enum Kind { Control, SendData, RecvData };
  Proxy* proxy;
  Kind kind;
  std::shared_ptr<Conn> conn;  // SendData/RecvData: keeps the slot's memory alive
  uint64_t step = 0;
  WireHeader header{};  // UCX may read it until the send completes
};

namespace {

void sendCallback(void* request, ucs_status_t status, void* user) {
  auto* op = static_cast<Proxy::Op*>(user);
  ucp_request_free(request);
  op->proxy->onOpDone(op, status);
}

void recvCallback(void* request, ucs_status_t status, size_t, void* user) { sendCallback(request, status, user); }

ucp_request_param_t paramsFor(Proxy::Op* op, bool receive) {
  ucp_request_param_t p{};
  p.op_attr_mask = UCP_OP_ATTR_FIELD_CALLBACK | UCP_OP_ATTR_FIELD_USER_DATA;
  if (receive) {
    p.cb.recv_am = recvCallback;
  } else {
    p.cb.send = sendCallback;
  }
  p.user_data = op;
  return p;
}

}  // namespace

void Proxy::onOpDone(Op* op, ucs_status_t status) {
  --opsInFlight_;
  if (op->conn) {
    Conn& c = *op->conn;
    --c.opsInFlight;
    if (status == UCS_OK && op->kind == Op::SendData) {
      c.sendDone[op->step % c.nSlots] = 1;
      publishSent(c);  // now rather than at the next pass: the daemon may be waiting for room
    } else if (status == UCS_OK) {
      c.arrived[op->step % c.nSlots] = 1;
      publishArrived(c);
    } else if (status != UCS_ERR_CANCELED) {
      // The endpoint's error callback names the cause; this connector cannot go on either way.
      poisonLocal(c, occlRemoteError);
    }
  }
  delete op;
}

WireHeader Proxy::headerFor(const Conn& c, WireKind kind) const {
  WireHeader h{};
  h.kind = kind;
  h.collId = c.key.collId;
  h.sender = c.key.sender;
  h.receiver = c.key.receiver;
  h.channel = c.key.channel;
  h.form = c.key.form;
  h.generation = c.generation;
  h.geometry = c.attached ? c.localGeometry : c.geometry;
  return h;
}

void Proxy::sendControl(Conn& c, WireKind kind, uint64_t value, uint32_t status) {
  Peer& peer = *peers_[c.peer];
  if (peer.failure != UCS_OK || peer.ep == nullptr) return;
  auto* op = new Op{this, Op::Control, nullptr, 0, headerFor(c, kind)};
  op->header.value = value;
  op->header.status = status;
  ucp_request_param_t p = paramsFor(op, false);
  ucs_status_ptr_t req = ucp_am_send_nbx(peer.ep, kWireAmId, &op->header, sizeof op->header, nullptr, 0, &p);
  if (req == nullptr || UCS_PTR_IS_ERR(req)) {
    // Sent at once, or the endpoint failed (its error callback poisons what depends on it).
    delete op;
    return;
  }
  ++opsInFlight_;
}

void Proxy::sendData(const std::shared_ptr<Conn>& c, uint64_t step) {
  Peer& peer = *peers_[c->peer];
  // Written by the daemon before it published the step (the caller's acquire of the tail).
  const uint64_t length = atomics::loadRelaxed(c->length(step));
  if (length > c->slotBytes) {
    poisonLocal(*c, occlInternalError);
    return;
  }
  auto* op = new Op{this, Op::SendData, c, step, headerFor(*c, WireKind::Data)};
  op->header.value = step;
  op->header.stamp = atomics::loadRelaxed(c->stamp(step));
  ucp_request_param_t p = paramsFor(op, false);
  ucs_status_ptr_t req =
      ucp_am_send_nbx(peer.ep, kWireAmId, &op->header, sizeof op->header, c->slot(step), length, &p);
  if (req == nullptr) {
    c->sendDone[step % c->nSlots] = 1;
    delete op;
  } else if (UCS_PTR_IS_ERR(req)) {
    poisonLocal(*c, occlRemoteError);
    delete op;
  } else {
    ++opsInFlight_;
    ++c->opsInFlight;
  }
}

std::shared_ptr<Conn> Proxy::connForMessage(const WireHeader& h, ConnectorEnd localEnd, int peer) {
  const ConnectorKey key = h.key();
  auto it = conns_.find(ConnId{key, h.generation});
  if (it != conns_.end()) return it->second;
  auto a = attaches_.find(key);
  if (a != attaches_.end() && h.generation < a->second) return nullptr;  // retired here: too late
  const uint32_t nSlots = static_cast<uint32_t>(h.geometry >> 40);
  const uint64_t slotBytes = h.geometry & ((uint64_t{1} << 40) - 1);
  if (nSlots == 0 || slotBytes == 0) return nullptr;  // malformed: not from an occl proxy
  std::shared_ptr<Conn> c = makeConn(key, h.generation, localEnd, peer, h.geometry);
  conns_.emplace(ConnId{key, h.generation}, c);
  return c;
}

ucs_status_t Proxy::onMessage(const WireHeader& h, void* data, size_t length, const ucp_am_recv_param_t* param) {
  // Which end this rank is follows from the key: messages to the receiver come from its sender.
  ConnectorEnd localEnd;
  int peer;
  if (h.receiver == options_.rank && h.sender != options_.rank) {
    localEnd = ConnectorEnd::Receiver;
    peer = h.sender;
  } else if (h.sender == options_.rank && h.receiver != options_.rank) {
    localEnd = ConnectorEnd::Sender;
    peer = h.receiver;
  } else {
    return UCS_OK;  // not a connector of this rank: dropped
  }
  if (peer < 0 || peer >= options_.nRanks || !peers_[peer] || peers_[peer]->failure != UCS_OK) return UCS_OK;
  const bool fromSender = localEnd == ConnectorEnd::Receiver;
  if ((h.kind == WireKind::Data && !fromSender) || (h.kind == WireKind::Credit && fromSender)) return UCS_OK;
  std::shared_ptr<Conn> conn = connForMessage(h, localEnd, peer);
  if (!conn || conn->base == nullptr) return UCS_OK;
  Conn& c = *conn;
  const uint64_t mine = c.attached ? c.localGeometry : c.geometry;
  if (h.geometry != mine) {
    // Both ends see the other's geometry on its first message, so both poison themselves.
    poisonLocal(c, occlInvalidUsage);
    return UCS_OK;  // a Data payload is dropped: it does not fit this FIFO
  }
  FifoHeader* fh = c.header();
  switch (h.kind) {
    case WireKind::Attach:
      break;
    case WireKind::Signature:
      atomics::storeRelease(c.isSender() ? &fh->receiverSig : &fh->senderSig, h.value);
      break;
    case WireKind::Poison: {
      (void)poisonHeader(fh, h.status != 0 ? h.status : uint32_t{occlRemoteError}, h.value);  // value: poisonSeq
      c.poisonSent = true;  // the peer knows: no echo
      break;
    }
    case WireKind::Credit:
      // The receiver's head never passes what was shipped to it.
      if (h.value > c.shipped) {
        poisonLocal(c, occlInternalError);
      } else if (h.value > c.credited) {
        c.credited = h.value;
        publishSent(c);
      }
      break;
    case WireKind::Data: {
      const uint64_t step = h.value;
      // The sender ships step s only once the receiver's head passed s - nSlots (credits), so s
      // is within a lap of the published tail and its slot is free.
      const bool inWindow = step >= c.tail && step < c.tail + c.nSlots &&
                            step < atomics::loadAcquire(&fh->head) + c.nSlots && !c.arrived[step % c.nSlots];
      if (!inWindow || length > c.slotBytes) {
        poisonLocal(c, occlInternalError);
        return UCS_OK;
      }
      // For symmetry with a FIFO the daemon fills itself; the receiving step does not read it.
      atomics::storeRelaxed(c.length(step), uint64_t{length});
      atomics::storeRelaxed(c.stamp(step), h.stamp);  // a variable count's, which the receiving step checks
      if (param->recv_attr & UCP_AM_RECV_ATTR_FLAG_RNDV) {
        auto* op = new Op{this, Op::RecvData, conn, step, h};
        ucp_request_param_t p = paramsFor(op, true);
        ucs_status_ptr_t req = ucp_am_recv_data_nbx(worker_->worker(), data, c.slot(step), length, &p);
        if (req == nullptr) {
          c.arrived[step % c.nSlots] = 1;
          publishArrived(c);
          delete op;
        } else if (UCS_PTR_IS_ERR(req)) {
          poisonLocal(c, occlRemoteError);
          delete op;
        } else {
          ++opsInFlight_;
          ++c.opsInFlight;
        }
      } else {
        std::memcpy(c.slot(step), data, length);
        c.arrived[step % c.nSlots] = 1;
        publishArrived(c);
      }
      break;
    }
  }
  return UCS_OK;
}

bool Proxy::serve(const std::shared_ptr<Conn>& conn) {
  Conn& c = *conn;
  if (c.base == nullptr) {
    // No FIFO could be allocated: the peer fails this connector rather than wait for it.
    if (!c.poisonSent) {
      sendControl(c, WireKind::Poison, 0, occlSystemError);
      c.poisonSent = true;
      return true;
    }
    return false;
  }
  const Peer& peer = *peers_[c.peer];
  const bool peerUp = peer.failure == UCS_OK;
  FifoHeader* fh = c.header();
  bool moved = false;
  if (peerUp && c.attached && !c.attachSent) {
    sendControl(c, WireKind::Attach, 0);
    c.attachSent = true;
    moved = true;
  }
  const uint64_t sig = atomics::loadAcquire(c.isSender() ? &fh->senderSig : &fh->receiverSig);
  if (peerUp && sig != 0 && sig != c.signatureSent) {
    sendControl(c, WireKind::Signature, sig);
    c.signatureSent = sig;
    moved = true;
  }
  const uint32_t poison = atomics::loadAcquire(&fh->poison);
  if (poison != 0 && !c.poisonSent) {
    sendControl(c, WireKind::Poison, atomics::loadRelaxed(&fh->poisonSeq), poison);
    c.poisonSent = true;
    moved = true;
  }
  if (c.attached && c.localGeometry != c.geometry) return moved;  // its attach failed: no daemon uses it
  if (c.isSender()) {
    if (peerUp) {
      const uint64_t tail = atomics::loadAcquire(&fh->tail);
      while (c.shipped < tail && c.shipped < c.credited + c.nSlots) {
        sendData(conn, c.shipped++);
        moved = true;
      }
    }
    moved |= publishSent(c);
  } else {
    moved |= publishArrived(c);
    const uint64_t head = atomics::loadAcquire(&fh->head);  // 0 until a daemon attached
    if (peerUp && head > c.creditSent) {
      sendControl(c, WireKind::Credit, head);
      c.creditSent = head;
      moved = true;
    }
  }
  return moved;
}

bool Proxy::publishSent(Conn& c) {
  const uint64_t before = c.sent;
  while (c.sent < c.shipped && c.sendDone[c.sent % c.nSlots]) c.sendDone[c.sent++ % c.nSlots] = 0;
  const uint64_t head = std::min(c.sent, c.credited);
  FifoHeader* fh = c.header();
  if (head > atomics::loadRelaxed(&fh->head)) {
    atomics::storeRelease(&fh->head, head);
    fifoPublished(fh, FifoWord::Head);
    return true;
  }
  return c.sent != before;
}

bool Proxy::publishArrived(Conn& c) {
  const uint64_t before = c.tail;
  while (c.arrived[c.tail % c.nSlots]) c.arrived[c.tail++ % c.nSlots] = 0;
  if (c.tail == before) return false;
  FifoHeader* fh = c.header();
  atomics::storeRelease(&fh->tail, c.tail);
  fifoPublished(fh, FifoWord::Tail);
  return true;
}

bool Proxy::retirable(const Conn& c) const {
  if (!c.attached || !c.released.load(std::memory_order_acquire) || c.opsInFlight > 0) return false;
  if (c.base == nullptr) return c.poisonSent;
  if (peers_[c.peer]->failure != UCS_OK) return true;  // nothing more can be said to it
  // Whatever this end still has to tell the peer, it tells before its record goes.
  const FifoHeader* fh = c.header();
  const uint32_t poison = atomics::loadAcquire(&fh->poison);
  if (!c.attachSent || (poison != 0 && !c.poisonSent)) return false;
  const uint64_t sig = atomics::loadAcquire(c.isSender() ? &fh->senderSig : &fh->receiverSig);
  if (sig != 0 && sig != c.signatureSent) return false;
  // A sender lets go of its FIFO only once everything its daemon published has left it.
  if (c.isSender() && c.localGeometry == c.geometry && poison == 0 && c.shipped < atomics::loadAcquire(&fh->tail))
    return false;
  return true;
}

}  // namespace occl::transport::net
