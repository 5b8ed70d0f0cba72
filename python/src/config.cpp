#include "config.hpp"

#include <cctype>
#include <string>
#include <string_view>

#include "future.hpp"

namespace occl::python {
namespace {

// "coll_timeout_ms" <-> "collTimeoutMs": Python's keywords and occlConfig_t's field names.
std::string camelCase(const std::string& snake) {
  std::string out;
  for (size_t i = 0; i < snake.size(); ++i)
    out += snake[i] == '_' && i + 1 < snake.size() ? static_cast<char>(std::toupper(static_cast<unsigned char>(snake[++i])))
                                                   : snake[i];
  return out;
}
std::string snakeCase(std::string_view camel) {
  std::string out;
  for (char ch : camel) {
    if (std::isupper(static_cast<unsigned char>(ch))) out += '_';
    out += static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
  }
  return out;
}

// The library's "unknown config field 'x': expected one of a, bC" in Python's spelling.
std::string unknownFieldMessage(const std::string& keyword, const std::string& why) {
  const std::string head = "expected one of ";
  const size_t at = why.find(head);
  std::string names;
  for (std::string_view rest = at == std::string::npos ? "" : std::string_view(why).substr(at + head.size());
       !rest.empty();) {
    const size_t comma = rest.find(", ");
    names += (names.empty() ? "" : ", ") + snakeCase(rest.substr(0, comma));
    rest = comma == std::string_view::npos ? "" : rest.substr(comma + 2);
  }
  return "unknown config field '" + keyword + "': expected one of " + names;
}

}  // namespace

occlConfig_t configFrom(const py::dict& config) {
  occlConfig_t c;
  if (occlResult_t r = occlConfigInit(&c); r != occlSuccess) raise(r, nullptr);
  for (auto [key, value] : config) {
    const std::string name = py::str(key);
    std::string text;
    if (py::isinstance<py::bool_>(value)) {
      text = value.cast<bool>() ? "1" : "0";
    } else if (py::isinstance<py::int_>(value)) {
      const auto v = value.cast<long long>();
      if (v < 0) throw py::value_error("config field '" + name + "' = " + std::to_string(v) + ": expected >= 0");
      text = std::to_string(v);
    } else if (py::isinstance<py::str>(value)) {
      text = value.cast<std::string>();
    } else {
      throw py::type_error("config field '" + name + "' = " + std::string(py::repr(value)) +
                           ": expected an integer or a word");
    }
    if (occlConfigSetField(&c, camelCase(name).c_str(), text.c_str()) == occlSuccess) continue;
    const std::string why = occlGetLastError(nullptr);
    if (why.rfind("unknown config field", 0) == 0) throw py::type_error(unknownFieldMessage(name, why));
    throw py::value_error(why);
  }
  return c;
}

}  // namespace occl::python
