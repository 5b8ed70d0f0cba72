// A call that occl must refuse: EXPECT_OCCL_ERROR checks its result code and that the
// communicator's last error names what was wrong (`keyword`, a piece of the message), so a test of
// bad input pins both the code and the words a user reads.
#pragma once

#include <gtest/gtest.h>

#include <string>

#include "occl/occl.h"

#define EXPECT_OCCL_ERROR(call, code, comm, keyword)                                              \
  do {                                                                                            \
    const occlResult_t r_ = (call);                                                               \
    const std::string msg_ = occlGetLastError(comm);                                              \
    EXPECT_EQ(r_, code) << #call << ": " << occlGetErrorString(r_) << ": " << msg_;               \
    EXPECT_NE(msg_.find(keyword), std::string::npos) << #call << ": \"" << msg_ << "\" lacks \"" \
                                                     << (keyword) << "\"";                        \
  } while (0)
