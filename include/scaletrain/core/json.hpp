// A small JSON value for writing report.json, `info --json` and benchmark output, and for reading
// back the run history a checkpoint keeps as JSON text. Objects keep insertion order so that
// reports read top-down as documented.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

namespace scaletrain {

class Json {
 public:
  enum class Type { null, boolean, number, integer, string, array, object };

  Json() = default;  // null
  Json(std::nullptr_t) {}
  Json(bool v) : type_(Type::boolean), bool_(v) {}
  Json(int v) : type_(Type::integer), int_(v) {}
  Json(int64_t v) : type_(Type::integer), int_(v) {}
  Json(uint64_t v) : type_(Type::integer), int_(static_cast<int64_t>(v)) {}
  Json(double v) : type_(Type::number), num_(v) {}
  Json(const char* v) : type_(Type::string), str_(v) {}
  Json(std::string v) : type_(Type::string), str_(std::move(v)) {}

  static Json array() {
    Json j;
    j.type_ = Type::array;
    return j;
  }
  static Json object() {
    Json j;
    j.type_ = Type::object;
    return j;
  }
  template <typename T>
  static Json array_of(const std::vector<T>& values) {
    Json j = array();
    for (const auto& v : values) j.push_back(Json(v));
    return j;
  }

  Type type() const { return type_; }
  // Arrays.
  Json& push_back(Json v);
  std::size_t size() const;
  // Objects: set (or replace) a key; operator[] inserts null when absent.
  Json& set(const std::string& key, Json v);
  Json& operator[](const std::string& key);
  bool contains(const std::string& key) const;

  // indent < 0: one line; otherwise pretty-printed with that many spaces.
  std::string dump(int indent = -1) const;

  // Parses JSON text (RFC 8259; numbers without a fraction or exponent that fit int64 become
  // integers). Throws scaletrain::Error naming the offset of the first problem.
  static Json parse(const std::string& text);

  // Reading. Each throws scaletrain::Error on a value of another type (as_double also takes an
  // integer); at(key) throws when the key is absent.
  bool is_null() const { return type_ == Type::null; }
  bool as_bool() const;
  int64_t as_int() const;
  double as_double() const;
  const std::string& as_string() const;
  const Json& at(std::size_t index) const;
  const Json& at(const std::string& key) const;
  // An object's members in order (empty for other types).
  const std::vector<std::pair<std::string, Json>>& items() const { return members_; }

 private:
  void write(std::string& out, int indent, int depth) const;
  Type type_ = Type::null;
  bool bool_ = false;
  int64_t int_ = 0;
  double num_ = 0.0;
  std::string str_;
  std::vector<Json> items_;
  std::vector<std::pair<std::string, Json>> members_;
};

// Escapes a string for JSON (quotes included).
std::string json_quote(const std::string& s);

}  // namespace scaletrain
