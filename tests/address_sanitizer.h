// RETRO_TEST_ASAN: defined to 1 when this translation unit is built with AddressSanitizer (g++ says so with
// __SANITIZE_ADDRESS__, clang with __has_feature(address_sanitizer)); `make sanitize` builds everything with it.
#pragma once

#if defined(__SANITIZE_ADDRESS__)
#define RETRO_TEST_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define RETRO_TEST_ASAN 1
#endif
#endif
