// Names occl's threads (occl-daemon<block>, occl-poller, occl-proxy, occl-bootstrap) so that
// top -H, perf and gdb tell them apart from the application's. Linux keeps 15 characters.
#pragma once

#include <pthread.h>

#include <string>

namespace occl {

inline void nameThisThread(const std::string& name) {
  pthread_setname_np(pthread_self(), name.substr(0, 15).c_str());
}

}  // namespace occl
