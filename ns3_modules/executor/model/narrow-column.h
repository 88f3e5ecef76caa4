/*
 * HeteroSim: a per-task integer column held at full width or narrowed.
 */
#ifndef HETEROSIM_NARROW_COLUMN_H
#define HETEROSIM_NARROW_COLUMN_H

#include <cstddef>
#include <span>

namespace ns3
{

/**
 * \ingroup executor
 * A read-only per-task column of integers borrowed from the caller: held at full width
 * (\p Wide) or, when every value fits, narrowed (\p Narrow), and read as \p Wide either way.
 * At most one of the two spans is non-empty; both empty means the column is absent.
 */
template <typename Wide, typename Narrow> struct NarrowColumn
{
    std::span<const Wide> wide;     //!< the values at full width, or empty
    std::span<const Narrow> narrow; //!< the values narrowed, or empty

    /** \return value \p i */
    Wide
    operator[](std::size_t i) const
    {
        return narrow.empty() ? wide[i] : static_cast<Wide>(narrow[i]);
    }

    /** \return the number of values */
    std::size_t
    size() const
    {
        return narrow.empty() ? wide.size() : narrow.size();
    }
};

} // namespace ns3

#endif /* HETEROSIM_NARROW_COLUMN_H */
