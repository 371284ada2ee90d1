// Implementation of folder_walk.h.
#include "core/folder_walk.h"

#include <sys/stat.h>

#include <algorithm>
#include <cerrno>
#include <deque>
#include <map>
#include <set>
#include <utility>
#include <vector>

#include "core/error.h"
#include "core/log.h"

namespace fs = std::filesystem;

namespace retro {

namespace {

using FolderId = std::pair<dev_t, ino_t>;

bool folder_id(const fs::path& p, FolderId& id) {
    struct stat st {};
    if (::stat(p.c_str(), &st) != 0) return false;
    id = {st.st_dev, st.st_ino};
    return true;
}

class FolderWalk {
public:
    explicit FolderWalk(const FolderWalkVisitor& v) : visitor_(v) {}

    void run(const fs::path& root) {
        FolderId id{};
        if (!folder_id(root, id)) user_error_in(root.string(), "cannot be read");
        first_path_[id] = root;
        walk(root);
        // the linked folders, in the order met; a link met while walking one is queued behind the rest
        while (!links_.empty()) {
            const fs::path link = links_.front();
            links_.pop_front();
            if (!folder_id(link, id)) continue;   // checked when queued; gone since
            if (!enter(link, id, true)) continue;
            walk(link);
        }
    }

private:
    // Whether to walk `folder` (reached through a link when `via_link`): not a folder read before (said, with the path
    // it was read under; a real folder met again below a linked one's tree is one), not one the visitor left out (it
    // said why; a link to it is skipped silently).
    bool enter(const fs::path& folder, const FolderId& id, bool via_link) {
        if (left_out_.count(id)) return false;
        if (const auto it = first_path_.find(id); it != first_path_.end()) {
            log_warn("skipping " + folder.string() + ": " + (via_link ? "a link to a folder" : "a folder") + " already read as " +
                     it->second.string());
            return false;
        }
        if (visitor_.enter_folder && !visitor_.enter_folder(folder)) {
            left_out_.insert(id);
            return false;
        }
        first_path_[id] = folder;
        return true;
    }

    // The folder's own entries: files reported, real folders walked at once, linked folders queued.
    void walk(const fs::path& folder) {
        std::error_code ec;
        std::vector<fs::directory_entry> entries;
        for (auto it = fs::directory_iterator(folder, ec); !ec && it != fs::directory_iterator(); it.increment(ec))
            entries.push_back(*it);
        if (ec) user_error_in(folder.string(), "cannot list folder: " + ec.message());
        std::sort(entries.begin(), entries.end(),
                  [](const fs::directory_entry& a, const fs::directory_entry& b) { return a.path().filename() < b.path().filename(); });
        for (const auto& e : entries) {
            std::error_code link_ec, st_ec;
            const bool is_link = e.is_symlink(link_ec);
            const fs::file_status st = e.status(st_ec);   // follows links
            // gone between the listing and now (or replaced: a path part no longer a folder; a stale NFS handle)
            // (a link that loops on itself is reported below, as a broken one)
            const bool gone = !st_ec || st_ec.value() == ENOENT || st_ec.value() == ENOTDIR || st_ec.value() == ESTALE ||
                              (is_link && st_ec.value() == ELOOP);
            if ((st_ec || st.type() == fs::file_type::not_found) && !gone) {
                // an entry whose status cannot be read (a folder that may be listed but not searched, mode 644; a
                // link into such a folder): its files cannot be opened. A corpus built without them, exit 0, looked
                // complete (a helper's odd-paths campaign, session 57)
                user_error_in(e.path().string(), "cannot read: " + st_ec.message(),
                              "make its folder searchable (chmod +x), or leave the folder out");
            }
            if (st_ec || st.type() == fs::file_type::not_found) {
                if (is_link) {
                    const std::string why = st_ec.value() == ELOOP ? "a link that loops on itself" : "a link to nothing (its target is gone)";
                    if (visitor_.on_broken_link) visitor_.on_broken_link(e.path(), why);
                    else log_warn("skipping " + e.path().string() + ": " + why);
                } else {
                    log_warn("skipping " + e.path().string() + ": " + (st_ec ? st_ec.message() : "it is gone"));
                }
                continue;
            }
            if (fs::is_directory(st)) {
                if (is_link) {
                    links_.push_back(e.path());
                    continue;
                }
                FolderId id{};
                if (!folder_id(e.path(), id) || !enter(e.path(), id, false)) continue;
                walk(e.path());
            } else if (fs::is_regular_file(st)) {
                if (visitor_.on_file) visitor_.on_file(e.path());
            } else {   // (skipped without a word before: a corpus's count of files left it out silently)
                const std::string what = fs::is_fifo(st)              ? "a named pipe"
                                         : fs::is_socket(st)          ? "a socket"
                                         : fs::is_character_file(st)  ? "a character device"
                                         : fs::is_block_file(st)      ? "a block device"
                                                                      : "not a regular file";
                const std::string said = std::string(is_link ? "a link to " : "") + what + ", not a file to read";
                if (visitor_.on_special_file) visitor_.on_special_file(e.path(), said);
                else log_warn("skipping " + e.path().string() + ": " + said);
            }
        }
    }

    const FolderWalkVisitor& visitor_;
    std::map<FolderId, fs::path> first_path_;   // the folders read, each with the path it was read under
    std::set<FolderId> left_out_;               // the folders the visitor refused
    std::deque<fs::path> links_;
};

}  // namespace

void folder_walk(const std::string& root, const FolderWalkVisitor& visitor) { FolderWalk(visitor).run(fs::path(root)); }

}  // namespace retro
