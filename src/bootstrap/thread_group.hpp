// The ranks of one process meeting as threads (bootstrap/group.hpp): occlCommInitAll's ranks,
// which have no TCP bootstrap, meet here when each calls occlCommSplit from its own thread.
//
// One generation per collective: a rank writes its part into the generation's buffer, the last
// to arrive publishes it, and everyone copies it out. Two buffers alternate, which is enough: a
// rank can reach generation g + 2 only once every rank has arrived at g + 1, so each has copied
// g out. A wait is bounded by the group's timeout; one that passes fails the group for every
// rank and names the ranks that never came. The group also gathers its members' status tables
// (status_board.hpp): a thread of the group reads every member's source each tick.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "bootstrap/group.hpp"
#include "util/status.hpp"

namespace occl::bootstrap {

// Makes the `n` members of a new group, member r for rank r; each may move to its own thread.
std::vector<std::unique_ptr<Group>> makeThreadGroup(int n, int64_t timeoutMs);

// The ranks `ranks` of `member`'s thread group meeting as a group of their own, without the
// others (a shrink's survivors): each of them calls it with the same list and gets its member,
// ranked by its place in the list. Ranks that pass different lists meet different groups, whose
// collectives time out naming who never came. Fails when `member` is not a thread group's.
Result<std::unique_ptr<Group>> threadSubgroup(Group& member, const std::vector<int>& ranks, int64_t timeoutMs);

}  // namespace occl::bootstrap
