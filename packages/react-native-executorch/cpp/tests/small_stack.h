// A test helper for parsers of untrusted input whose recursion must be bounded.
#pragma once

#include <gtest/gtest.h>
#include <pthread.h>

#include <functional>

namespace rne::test {

// Runs `body` on a thread with a phone-sized stack (an iOS secondary thread has 512 KiB; half
// of that here), so a recursion that grows with the input fails the test by crashing it.
inline void on_small_stack(const std::function<void()>& body) {
  pthread_attr_t attr;
  ASSERT_EQ(pthread_attr_init(&attr), 0);
  ASSERT_EQ(pthread_attr_setstacksize(&attr, 256 * 1024), 0);
  pthread_t thread;
  auto run = [](void* arg) -> void* {
    (*static_cast<const std::function<void()>*>(arg))();
    return nullptr;
  };
  ASSERT_EQ(pthread_create(&thread, &attr, run, const_cast<std::function<void()>*>(&body)), 0);
  pthread_join(thread, nullptr);
  pthread_attr_destroy(&attr);
}

}  // namespace rne::test
