// A small JSON value for writing report.json, `info --json` and benchmark output.
// Objects keep insertion order so that reports read top-down as documented.
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
