// What a call under test throws, as the unit tests assert it: the message of the `Error` it threw,
// or "(no error)" when it returned (any other exception fails the test case).
#pragma once

#include <string>
#include <utility>

template <typename Error, typename Call>
std::string error_message(Call&& call) {
  try {
    std::forward<Call>(call)();
  } catch (const Error& error) {
    return error.what();
  }
  return "(no error)";
}
