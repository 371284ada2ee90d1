// An output file written as NAME.tmp that survives a kill and can be continued: reopened, cut back
// to the length recorded in a checkpoint, appended to, and finally renamed to NAME (optionally after
// patching a header at offset 0). Used by the chunk database writer for --resume.
// The bytes past the first `hash_from` (a header patched at commit) are fingerprinted as they are written; the
// checkpoint records the fingerprint with the length, and a resume reads the kept bytes back through it: a file
// changed while the run was stopped (a disk error, an edit) is refused, not continued into a database whose manifest
// then fingerprints the damage.
#pragma once
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "core/fingerprint.h"

namespace retro {

class ResumableOutput {
public:
    // Fresh start: creates (truncates) NAME.tmp. Resume: reopens NAME.tmp (or renames a NAME left by
    // a run killed while committing back to NAME.tmp) and cuts it to `resume_length` bytes; when `resume_hash` is
    // given (a checkpoint's hash()), the kept bytes past `hash_from` must give it (UserError naming NAME.tmp).
    ResumableOutput(const std::string& path, bool resume, std::uint64_t resume_length = 0, std::uint64_t hash_from = 0,
                    const std::string& resume_hash = "");
    ~ResumableOutput();   // closes; keeps NAME.tmp so --resume can continue it
    ResumableOutput(const ResumableOutput&) = delete;
    ResumableOutput& operator=(const ResumableOutput&) = delete;

    void write(const void* data, std::size_t n);
    void write(const std::string& s) { write(s.data(), s.size()); }
    std::uint64_t size() const { return size_; }
    std::string hash() const { return hash_->hex(); }   // of the bytes past hash_from written so far
    void sync();   // data reaches the disk before a checkpoint names this length
    // Writes `header` at offset 0 (over bytes reserved for it), fsyncs and renames NAME.tmp to NAME.
    void commit(const std::string& header = "");
    const std::string& path() const { return path_; }

private:
    std::string path_, tmp_;
    int fd_ = -1;
    std::uint64_t size_ = 0, hash_from_ = 0;
    std::unique_ptr<Fingerprinter> hash_ = std::make_unique<Fingerprinter>();
};

}  // namespace retro
