// A memory mapping that unmaps itself: owned by one object, moved, never copied. For the
// command line tools, as unique_fd is for descriptors (the runtime's mappings live as long
// as the process, or are recycled, never unmapped: core/task_ctx.h, core/exec_mem.cpp).
#pragma once

#include <sys/mman.h>

#include <cstddef>
#include <utility>

namespace dprobe::tools
{

class unique_mapping
{
  public:
    unique_mapping() noexcept = default;
    // Takes ADDR..ADDR+SIZE, as mmap returned it (MAP_FAILED holds nothing).
    unique_mapping(void *addr, size_t size) noexcept
        : addr_(addr == MAP_FAILED ? nullptr : addr), size_(addr_ ? size : 0)
    {
    }
    unique_mapping(unique_mapping &&o) noexcept
        : addr_(std::exchange(o.addr_, nullptr)), size_(std::exchange(o.size_, 0))
    {
    }
    unique_mapping &operator=(unique_mapping &&o) noexcept
    {
        if (this != &o) {
            reset();
            addr_ = std::exchange(o.addr_, nullptr);
            size_ = std::exchange(o.size_, 0);
        }
        return *this;
    }
    unique_mapping(const unique_mapping &) = delete;
    unique_mapping &operator=(const unique_mapping &) = delete;
    ~unique_mapping() { reset(); }

    void *get() const noexcept { return addr_; }
    size_t size() const noexcept { return size_; }
    explicit operator bool() const noexcept { return addr_ != nullptr; }
    // Unmaps what it holds (if anything).
    void reset() noexcept
    {
        if (addr_) ::munmap(addr_, size_);
        addr_ = nullptr;
        size_ = 0;
    }

  private:
    void *addr_ = nullptr;
    size_t size_ = 0;
};

} // namespace dprobe::tools
