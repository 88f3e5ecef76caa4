/*
 * HeteroSim: RCCC, the receiver-credit congestion control of the Ultra Ethernet transport (UET).
 */
#include "rccc.h"

#include "ns3/double.h"
#include "ns3/log.h"

#include <algorithm>
#include <cmath>

namespace ns3
{

NS_LOG_COMPONENT_DEFINE("Rccc");
NS_OBJECT_ENSURE_REGISTERED(Rccc);

TypeId
Rccc::GetTypeId()
{
    static TypeId tid =
        TypeId("ns3::Rccc")
            .SetParent<RdmaCongestionControl>()
            .SetGroupName("Heterosim")
            .AddConstructor<Rccc>()
            .AddAttribute("InitialCredit",
                          "Credit a sender holds before its first grant, in bandwidth-delay "
                          "products (line rate x base RTT, rounded up to whole packets): 1 is "
                          "the least that lets a lone flow send at line rate until the first "
                          "credit returns one RTT later; 0 waits for credit",
                          DoubleValue(1.0),
                          MakeDoubleAccessor(&Rccc::m_initialBdps),
                          MakeDoubleChecker<double>(0.0));
    return tid;
}

Rccc::Rccc()
{
    NS_LOG_FUNCTION(this);
}

void
Rccc::Start(double lineRateBps, Time baseRtt, uint32_t mtuBytes)
{
    RdmaCongestionControl::Start(lineRateBps, baseRtt, mtuBytes);
    double bdp = lineRateBps / 8.0 * baseRtt.GetSeconds() * m_initialBdps;
    double packets = std::ceil(bdp / static_cast<double>(std::max<uint32_t>(mtuBytes, 1)));
    m_initialCredit = static_cast<uint64_t>(packets) * mtuBytes;
}

bool
Rccc::UsesCredit() const
{
    return true;
}

uint64_t
Rccc::GetInitialCredit() const
{
    return m_initialCredit;
}

} // namespace ns3
