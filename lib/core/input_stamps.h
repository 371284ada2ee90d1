// The inputs a tool run read, stamped as it first opened them (device, inode, size, modification time), so that the
// folder it finishes records the files it read and not ones made again meanwhile. A helper's audit (session 69): a
// manifest hashed its inputs as it was written, at the end, so a database rebuilt with --force while retro-train read
// the old one (memory-mapped: the old file lives on) was recorded as the one trained on, and retro-generate then took
// the model with the wrong tokenizer; retro-knn, retro-chunk (its tokenizer, its corpus) the same. Stamping is on
// in the tools' processes only (tool_main): a library caller (the tests, retro-bench's stages over scratch folders it
// rewrites) stamps nothing. Files under a folder this process writes (output_folder_lock) are its own, never refused.
// provides: input_stamps_enable, input_stamp, input_stamp_opened, input_stamp_file, input_read_whole, input_stamps_check
#pragma once
#include <sys/stat.h>

#include <cstdio>
#include <string>
#include <vector>

namespace retro {

// Stamping on (a tool's process) or off (the default).
void input_stamps_enable(bool on);
// Stamps `path` as it is now, if stamping is on and it is not stamped yet (the first read is the one the run used).
void input_stamp(const std::string& path);
// The same for a file this run has open (`st` from fstat of its descriptor: the file read, whatever the path names now).
void input_stamp_opened(const std::string& path, const struct stat& st);
// input_stamp_opened for an open stream (fstat of its descriptor).
void input_stamp_file(const std::string& path, std::FILE* f);
// Reads file `path` whole into `bytes` and stamps the file it read (opened once: a file made again at the path between
// a stamp by path and the open was read unstamped). False where it cannot be opened (errno says why); a read error
// throws UserError naming it.
bool input_read_whole(const std::string& path, std::string& bytes);
// Throws UserError naming the first stamped input among `inputs` (files, or folders: the files under them) that the
// path no longer names as it was: another file there (made again, copied over), the same file rewritten (size or
// modification time moved), or none (removed or moved: the run reads on what it opened, but its folder would record a
// file that is not there). Only what the caller records is checked: a file read and fingerprinted on the way (an
// --init-from checkpoint that its run prunes meanwhile) is not this check's. Called before a folder is marked complete
// (Manifest::write, Manifest::inputs_check: the manifest's inputs) and before retro-train saves a checkpoint (--db, --knn).
void input_stamps_check(const std::vector<std::string>& inputs);

}  // namespace retro
