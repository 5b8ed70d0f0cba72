// What the proxies of two ranks say to each other: one UCX active message per event, whose header
// is a WireHeader; only Data carries a payload: the bytes the sender filled in one FIFO slot (its
// length word, queues/fifo.hpp).
//
// Every message names its connector by (key, generation) and carries the sender's geometry, so
// whichever message of a generation arrives first can create the receiving side's FIFO (the peer
// may not have attached yet) and a geometry mismatch is seen on any message.
#pragma once

#include <cstdint>
#include <type_traits>

#include "transport/connector.hpp"

namespace occl::transport::net {

inline constexpr unsigned kWireAmId = 0x0CC1;

enum class WireKind : uint32_t {
  Attach = 1,     // the sending end attached: value = 0
  Data = 2,       // sender -> receiver: value = step, payload = the filled part of its slot
  Credit = 3,     // receiver -> sender: value = the receiver's head
  Signature = 4,  // value = the sending end's registration signature
  Poison = 5,     // status = the occlResult_t the connector fails with, value = FifoHeader::poisonSeq
};

struct WireHeader {
  WireKind kind;
  uint32_t status;  // Poison only
  uint64_t collId;
  int32_t sender, receiver, channel, form;  // ConnectorKey
  uint64_t generation;
  uint64_t geometry;  // fifoGeometry() of the end that sent this
  uint64_t value;
  uint64_t stamp;     // Data only: the slot's stamp (queues/fifo.hpp: a variable count's)

  ConnectorKey key() const { return ConnectorKey{collId, sender, receiver, channel, form}; }
};
static_assert(std::is_trivially_copyable_v<WireHeader> && sizeof(WireHeader) == 64, "WireHeader is sent as bytes");

}  // namespace occl::transport::net
