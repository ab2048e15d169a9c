// Helpers for tests of readers that reject bad input with InputError.
#pragma once

#include <gtest/gtest.h>

#include <string>

#include "model/input_error.h"

namespace tessera::testing {

// Succeeds if `text` contains `part`; the failure message shows both.
inline ::testing::AssertionResult Contains(const std::string& text, const std::string& part) {
  if (text.find(part) != std::string::npos) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << "'" << text << "' does not contain '" << part << "'";
}

// The message of the InputError `f` throws; a test failure if it throws none.
template <class F>
std::string error_of(F&& f) {
  try {
    f();
  } catch (const InputError& e) {
    return e.what();
  }
  ADD_FAILURE() << "expected an InputError";
  return "";
}

}  // namespace tessera::testing
