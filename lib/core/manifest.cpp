// Implementation of manifest.h.
#include "core/manifest.h"

#include <chrono>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "core/atomic_file.h"
#include "core/error.h"
#include "core/fingerprint.h"
#include "core/npy.h"
#include "retrokit/version.h"

namespace fs = std::filesystem;

namespace retro {
namespace {
std::string utc_now() {
    std::time_t t = std::chrono::system_clock::to_time_t(std::chrono::system_clock::now());
    std::tm tm{};
    gmtime_r(&t, &tm);
    char buf[32];
    std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm);
    return buf;
}
}  // namespace

Manifest::Manifest(const ToolContext& ctx) {
    json_["tool"] = ctx.tool;
    json_["version"] = RETROKIT_VERSION;
    json_["git_commit"] = RETROKIT_GIT_COMMIT;
    json_["command_line"] = ctx.command_line;
    json_["created"] = utc_now();
    json_["parameters"] = nlohmann::json::object();
    json_["inputs"] = nlohmann::json::array();
    json_["outputs"] = nlohmann::json::array();
}

void Manifest::add_input(const std::string& role, const std::string& path) {
    std::error_code ec;
    auto size = fs::file_size(path, ec);
    if (ec) user_error_in(path, "cannot read input: " + ec.message());
    json_["inputs"].push_back({{"role", role},
                               {"path", fs::absolute(path).lexically_normal().string()},
                               {"size", size},
                               {"fingerprint", fingerprint_file(path)}});
}

void Manifest::add_input_folder(const std::string& role, const std::string& dir) {
    nlohmann::json m = manifest_read(dir);
    json_["inputs"].push_back({{"role", role},
                               {"path", fs::absolute(dir).lexically_normal().string()},
                               {"tool", m.value("tool", "")},
                               {"fingerprint", folder_fingerprint(m)}});
}

void Manifest::add_output(const std::string& dir, const std::string& name, const std::string& dtype_tag) {
    std::string path = (fs::path(dir) / name).string();
    nlohmann::json out{{"path", name}, {"size", fs::file_size(path)}, {"fingerprint", fingerprint_file(path)}};
    if (name.size() > 4 && name.substr(name.size() - 4) == ".npy") {
        NpyArray a(path);
        out["shape"] = a.shape();
        out["dtype"] = dtype_tag.empty() ? dtype_name(a.dtype()) : dtype_tag;
    } else if (!dtype_tag.empty()) {
        out["dtype"] = dtype_tag;
    }
    json_["outputs"].push_back(out);
}

void Manifest::write(const std::string& dir) const {
    write_file_atomic((fs::path(dir) / "manifest.json").string(), json_.dump(2) + "\n");
}

nlohmann::json json_read_file(const std::string& path) {
    std::ifstream in(path);
    if (!in) user_error_in(path, "missing");
    try {
        return nlohmann::json::parse(in);
    } catch (const nlohmann::json::exception& e) {
        user_error_in(path, std::string("malformed JSON: ") + e.what());
    }
}

nlohmann::json manifest_read(const std::string& dir) {
    std::string path = (fs::path(dir) / "manifest.json").string();
    std::ifstream in(path);
    if (!in) user_error_in(path, "missing: the folder is incomplete or was not made by a RetroKit tool");
    try {
        nlohmann::json j = nlohmann::json::parse(in);
        if (!j.is_object() || !j.contains("outputs") || !j["outputs"].is_array())
            user_error_in(path, "malformed manifest: no 'outputs' list");
        return j;
    } catch (const nlohmann::json::exception& e) {
        user_error_in(path, std::string("malformed manifest: ") + e.what());
    }
}

std::string manifest_input(const nlohmann::json& manifest, const std::string& role, const std::string& field) {
    for (const auto& in : manifest.value("inputs", nlohmann::json::array()))
        if (in.value("role", "") == role) return in.value(field, "");
    return "";
}

std::string folder_fingerprint(const nlohmann::json& manifest) {
    std::string all;
    for (const auto& o : manifest["outputs"]) all += o.value("path", "") + "=" + o.value("fingerprint", "") + ";";
    return fingerprint_bytes(all.data(), all.size());
}

void manifest_verify_output(const std::string& dir, const std::string& name) {
    nlohmann::json m = manifest_read(dir);
    std::string path = (fs::path(dir) / name).string();
    for (const auto& o : m["outputs"]) {
        if (o.value("path", "") != name) continue;
        if (fingerprint_file(path) != o.value("fingerprint", ""))
            user_error_in(path, "does not match the fingerprint in its manifest.json (modified or half-written)",
                          "re-run the stage that made it");
        return;
    }
    user_error_in(path, "is not listed in " + (fs::path(dir) / "manifest.json").string());
}

}  // namespace retro
