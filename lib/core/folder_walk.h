// The one walk over a folder tree that the tools read their inputs with (a corpus folder, an image folder).
// Folders linked by symlinks are followed, but every real folder is entered once: a link back up the tree
// (`data/all -> .`) used to be followed until ELOOP named a path 40 links deep, and two such links make the
// walk 2^depth long. The tree's own folders are walked first and the linked folders after them, so a folder
// reachable both ways keeps its path in the tree and the link is the one skipped (with a warning); a broken
// link, or a link that loops on itself, is a warning too. Deterministic: entries in lexical order.
#pragma once
#include <filesystem>
#include <functional>
#include <string>

namespace retro {

struct FolderWalkVisitor {
    // Called for every folder below the root before it is entered; false leaves it (and what it holds) out.
    std::function<bool(const std::filesystem::path& folder)> enter_folder;
    // Called for every regular file (or link to one), the path as walked (under the root, through links).
    std::function<void(const std::filesystem::path& file)> on_file;
    // Called for a link to nothing or a link that loops, with why; unset, each is a warning. A caller that
    // reads only some names warns about those alone.
    std::function<void(const std::filesystem::path& link, const std::string& why)> on_broken_link;
    // Called for an entry that is neither a folder nor a regular file (a pipe, a socket, a device, or a link to one:
    // never read, a pipe would block), with what it is; unset, each is a warning.
    std::function<void(const std::filesystem::path& entry, const std::string& what)> on_special_file;
};

// Walks `root` (a folder). A folder that cannot be listed is an error naming it (exit 2).
void folder_walk(const std::string& root, const FolderWalkVisitor& visitor);

}  // namespace retro
