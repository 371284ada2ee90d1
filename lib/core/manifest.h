// manifest.json, one per output folder: which tool made it (version, git commit, full command
// line), with which parameters, from which inputs (path, size, fingerprint) and what it wrote
// (path, shape, dtype, size, fingerprint). Field list: docs/formats.md "manifest.json".
#pragma once
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "core/dtype.h"
#include "core/tool_context.h"

namespace retro {

class Manifest {
public:
    Manifest(const ToolContext& ctx);
    nlohmann::json& parameters() { return json_["parameters"]; }
    nlohmann::json& extra() { return json_; }   // tool-specific top-level fields

    // Records an input file (size and fingerprint read now). `role` names what it is ("tokenizer").
    void add_input(const std::string& role, const std::string& path);
    // Records an input folder by its manifest's fingerprint of outputs (see folder_fingerprint).
    void add_input_folder(const std::string& role, const std::string& dir);
    // Records an output file in `dir` (path stored relative to it). For .npy the shape and dtype
    // come from its header; `dtype_tag` overrides the dtype (e.g. "bf16" for a '<u2' array).
    void add_output(const std::string& dir, const std::string& name, const std::string& dtype_tag = "");
    // Writes dir/manifest.json atomically (last, so its presence marks a complete folder).
    void write(const std::string& dir) const;
    const nlohmann::json& json() const { return json_; }

private:
    nlohmann::json json_;
};

// Reads any JSON file; throws UserError naming it when missing or malformed.
nlohmann::json json_read_file(const std::string& path);
// Reads dir/manifest.json; throws UserError naming it when missing or malformed.
nlohmann::json manifest_read(const std::string& dir);
// The `field` ("path", "fingerprint", ...) of the first input of `role` a manifest records, or "".
std::string manifest_input(const nlohmann::json& manifest, const std::string& role, const std::string& field = "path");
// A fingerprint of a whole output folder: xxh3 over its manifest's output fingerprints, so two
// folders with identical outputs have the same value whatever command made them.
std::string folder_fingerprint(const nlohmann::json& manifest);
// Throws UserError unless `dir`'s manifest lists output `name` with the file's current fingerprint.
void manifest_verify_output(const std::string& dir, const std::string& name);

}  // namespace retro
