// A text a command reads from standard input in place of an argument (`retro-generate RUN -`, `retro-index query
// INDEX -`): read whole up to a bound, refused in one line where it cannot be (a closed or unreadable standard input,
// one without end, bytes that are not UTF-8), its trailing newlines dropped.
// provides: stdin_text_read
#pragma once
#include <cstddef>
#include <string>

namespace retro {

// `what` names the text in the refusals ("prompt": "standard input: is closed: there is no prompt to read"); `fix`
// says where else to give it ("give the prompt as an argument").
std::string stdin_text_read(const std::string& what, const std::string& fix, std::size_t max_bytes = std::size_t{64} << 20);

}  // namespace retro
