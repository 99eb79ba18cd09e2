"""The demo company's vocabulary: people's names, places, departments, projects, products.

Everything here is constant data. The generators draw from it with a seeded random stream,
so the vocabulary decides what the data *can* say and the seed decides what it *does* say.
The enum-like lists (regions, departments, roles, statuses, grades) are also what the demo
capability manifests declare as legal ``values``; a test keeps the two in step.
"""

from __future__ import annotations

from typing import NamedTuple

#: The fictional company whose data the demo holds.
COMPANY_NAME = "云启科技有限公司"

# --- people -----------------------------------------------------------------------------

#: Common Chinese surnames, most frequent first (the generator weights them that way).
SURNAMES = (
    "王李张刘陈杨黄赵吴周徐孙马朱胡郭何林罗高郑梁谢宋唐许韩冯邓曹彭曾肖田董袁潘蒋蔡余杜叶程"
    "苏魏吕丁任沈姚卢姜崔钟谭陆汪范金石廖贾夏韦付方白邹孟熊秦邱江尹薛闫段雷侯龙史陶黎贺顾毛"
    "郝龚邵万钱严覃武戴莫孔向汤"
)

#: Characters used in given names, by gender; a given name is one or two of them.
GIVEN_NAME_CHARS = {
    "男": "伟强磊军勇杰涛明超刚平辉鹏华飞斌宇浩凯健俊帆帅旭宁龙林欢阳波晨峰博文昊然睿哲轩远航志诚",
    "女": "芳娜敏静丽艳娟霞秀玲桂英慧琳雪婷倩颖洁晶梅琴云莉萍燕红佳怡欣悦彤涵瑶婧雯思语诗梦薇",
}

GENDERS = ("男", "女")

# --- places -----------------------------------------------------------------------------

#: Sales regions and the cities the company works in, the first city being the regional office.
REGION_CITIES: dict[str, tuple[str, ...]] = {
    "华东": ("上海", "杭州", "南京", "苏州", "合肥", "济南", "福州"),
    "华北": ("北京", "天津", "石家庄", "太原"),
    "华南": ("深圳", "广州", "南宁", "海口"),
    "华中": ("武汉", "长沙", "郑州", "南昌"),
    "西南": ("成都", "重庆", "昆明", "贵阳"),
    "西北": ("西安", "兰州", "乌鲁木齐", "银川"),
    "东北": ("沈阳", "大连", "长春", "哈尔滨"),
}
REGIONS = tuple(REGION_CITIES)

#: Six-digit administrative prefixes for the fake identity-card numbers, per city.
CITY_AREA_CODES = {
    "上海": "310101", "杭州": "330102", "南京": "320102", "苏州": "320505", "合肥": "340102",
    "济南": "370102", "福州": "350102", "北京": "110101", "天津": "120101", "石家庄": "130102",
    "太原": "140105", "深圳": "440303", "广州": "440103", "南宁": "450102", "海口": "460105",
    "武汉": "420102", "长沙": "430102", "郑州": "410102", "南昌": "360102", "成都": "510104",
    "重庆": "500103", "昆明": "530102", "贵阳": "520102", "西安": "610102", "兰州": "620102",
    "乌鲁木齐": "650102", "银川": "640104", "沈阳": "210102", "大连": "210202", "长春": "220102",
    "哈尔滨": "230102",
}

# --- organisation -----------------------------------------------------------------------


class Department(NamedTuple):
    """A department: its share of the headcount, where it sits, and its job titles."""

    name: str
    weight: float  # share of the headcount beyond the skeleton
    offices: tuple[str, ...]  # regions whose offices host it; sales-like ones are everywhere
    head_title: str
    manager_title: str
    titles: tuple[str, ...]  # individual contributors' titles, junior first


DEPARTMENTS = (
    Department("总经办", 0.01, ("华东",), "总经理", "总经理助理", ("行政专员", "总经理秘书")),
    Department(
        "研发部", 0.30, ("华东", "华北", "华南", "西南"), "研发总监", "研发经理",
        ("初级工程师", "工程师", "高级工程师", "资深工程师", "测试工程师", "架构师"),
    ),
    Department(
        "产品部", 0.08, ("华东", "华北"), "产品总监", "产品经理",
        ("产品专员", "产品经理", "高级产品经理", "交互设计师", "视觉设计师"),
    ),
    Department(
        "运维部", 0.07, ("华东", "华北", "西南"), "运维总监", "运维经理",
        ("运维工程师", "高级运维工程师", "SRE工程师", "数据库管理员"),
    ),
    Department(
        "销售部", 0.22, REGIONS, "销售总监", "区域销售经理",
        ("销售代表", "高级销售代表", "大客户经理", "售前顾问"),
    ),
    Department(
        "市场部", 0.08, ("华东", "华北", "华南"), "市场总监", "市场经理",
        ("市场专员", "品牌专员", "活动策划", "内容运营"),
    ),
    Department(
        "客户成功部", 0.10, REGIONS, "客户成功总监", "客户成功经理",
        ("实施工程师", "客户成功专员", "技术支持工程师"),
    ),
    Department(
        "财务部", 0.05, ("华东",), "财务总监", "财务经理", ("会计", "出纳", "财务分析师")
    ),
    Department(
        "人事部", 0.05, ("华东", "华北"), "人力资源总监", "人力资源经理",
        ("招聘专员", "人事专员", "培训专员", "薪酬专员"),
    ),
    Department("法务部", 0.02, ("华东",), "法务总监", "法务经理", ("法务专员", "合规专员")),
)
DEPARTMENT_NAMES = tuple(department.name for department in DEPARTMENTS)

#: Monthly salary bands (yuan) by kind of title, used only for the denied salary column.
SALARY_BANDS = {"head": (45_000, 80_000), "manager": (28_000, 45_000), "staff": (9_000, 30_000)}

EMPLOYEE_STATUSES = ("在职", "离职")

# --- projects ---------------------------------------------------------------------------


class ProjectSpec(NamedTuple):
    """An internal project: what it builds, its usual team size and the technical words its
    reports use."""

    name: str
    description: str
    department: str
    team: int
    keywords: tuple[str, ...]


PROJECTS = (
    ProjectSpec("星火", "新一代自助式数据分析平台，整合各业务线数据，提供指标体系与可视化报表", "研发部", 16,
                ("数据湖", "Flink", "指标体系", "实时计算")),
    ProjectSpec("北斗", "全国门店定位与物流调度系统，支撑配送路径规划", "研发部", 12,
                ("路径规划", "GIS", "Kafka", "调度算法")),
    ProjectSpec("天宫", "公有云与私有云统一管理平台", "运维部", 10,
                ("Kubernetes", "容器化", "多集群", "资源调度")),
    ProjectSpec("神舟", "核心交易系统微服务化改造", "研发部", 14,
                ("微服务", "分库分表", "Spring Cloud", "链路追踪")),
    ProjectSpec("鲲鹏", "国产化适配与信创迁移项目", "研发部", 9,
                ("信创", "国产数据库", "ARM服务器", "兼容性测试")),
    ProjectSpec("蛟龙", "海量日志检索与安全审计平台", "运维部", 8,
                ("Elasticsearch", "日志采集", "安全审计", "告警规则")),
    ProjectSpec("嫦娥", "面向客户的移动端App重构", "产品部", 10,
                ("Flutter", "用户体验", "埋点", "灰度发布")),
    ProjectSpec("悟空", "大模型智能客服与知识库问答", "研发部", 12,
                ("大模型", "RAG", "向量检索", "提示词工程")),
    ProjectSpec("天问", "经营分析驾驶舱与管理层报表", "产品部", 6,
                ("BI", "数据可视化", "指标口径", "数据治理")),
    ProjectSpec("羲和", "能耗监测与碳排放管理系统", "研发部", 8,
                ("物联网", "时序数据库", "边缘计算", "数据采集")),
    ProjectSpec("祝融", "工业质检视觉识别系统", "研发部", 9,
                ("机器视觉", "模型训练", "缺陷检测", "GPU集群")),
    ProjectSpec("九章", "统一权限与单点登录平台", "研发部", 8,
                ("单点登录", "OAuth2", "权限模型", "审计日志")),
    ProjectSpec("盘古", "企业主数据管理平台", "研发部", 10,
                ("主数据", "数据清洗", "ETL", "数据质量")),
    ProjectSpec("昆仑", "数据库高可用与灾备体系建设", "运维部", 6,
                ("MySQL", "主从复制", "异地容灾", "备份恢复")),
    ProjectSpec("夸父", "全链路压测与性能优化专项", "运维部", 7,
                ("压测", "性能优化", "慢查询", "容量规划")),
    ProjectSpec("墨子", "数据安全与隐私合规专项", "研发部", 6,
                ("数据脱敏", "加密", "等保测评", "合规审计")),
    ProjectSpec("玄鸟", "营销自动化与会员运营平台", "产品部", 9,
                ("用户画像", "A/B测试", "消息推送", "会员体系")),
    ProjectSpec("青鸾", "合同与回款管理系统", "研发部", 8,
                ("工作流", "电子签章", "对账", "财务接口")),
    ProjectSpec("烛龙", "智能运维AIOps平台", "运维部", 7,
                ("AIOps", "异常检测", "根因分析", "监控告警")),
    ProjectSpec("长风", "渠道伙伴门户与订单协同平台", "产品部", 7,
                ("渠道管理", "订单协同", "接口联调", "Redis")),
)
PROJECT_NAMES = tuple(project.name for project in PROJECTS)

PROJECT_STATUSES = ("进行中", "已完成", "已暂停")

#: Project roles, and which departments staff each role.
ROLE_DEPARTMENTS = {
    "负责人": ("研发部", "产品部", "运维部"),
    "架构师": ("研发部",),
    "开发": ("研发部",),
    "测试": ("研发部",),
    "产品": ("产品部",),
    "设计": ("产品部",),
    "运维": ("运维部",),
}
PROJECT_ROLES = tuple(ROLE_DEPARTMENTS)

# --- customers --------------------------------------------------------------------------

#: Industries, each with the words its company names are made of.
INDUSTRY_WORDS = {
    "制造": ("精密机械", "重工", "电子", "汽车零部件", "新材料"),
    "金融": ("金融服务", "融资租赁", "资产管理", "保险经纪"),
    "零售": ("商贸", "百货", "连锁超市", "电子商务"),
    "物流": ("物流", "供应链", "快运", "仓储"),
    "医疗": ("医疗器械", "医药", "健康管理", "生物科技"),
    "能源": ("能源", "电力", "新能源", "燃气"),
    "教育": ("教育科技", "职业教育", "文化传媒"),
    "互联网": ("网络科技", "信息技术", "软件", "数字科技"),
}
INDUSTRIES = tuple(INDUSTRY_WORDS)

#: Brand words for company names (invented, not real companies).
BRAND_WORDS = (
    "华信", "远景", "瑞达", "恒通", "鼎盛", "博远", "天成", "中科", "金桥", "宏达", "新元", "星河",
    "启明", "海纳", "东方", "长风", "云帆", "智联", "嘉禾", "同创", "永泰", "汇通", "光华", "德润",
    "宇航", "润泽", "瀚海", "盛世", "锦程", "凯旋", "明远", "众合", "华瑞", "泰和", "鸿远", "明德",
)
COMPANY_SUFFIXES = ("有限公司", "股份有限公司", "集团有限公司")

CUSTOMER_LEVELS = ("战略", "重点", "普通")
CUSTOMER_LEVEL_WEIGHTS = (0.08, 0.27, 0.65)
#: How much more often a customer of each level orders than an ordinary one.
CUSTOMER_LEVEL_ACTIVITY = {"战略": 6.0, "重点": 3.0, "普通": 1.0}

#: Each region's share of the market (sales lines, customers, contracts).
REGION_MARKET_SHARE = {
    "华东": 0.30, "华北": 0.18, "华南": 0.18, "华中": 0.10, "西南": 0.12, "西北": 0.05, "东北": 0.07,
}

# --- products ---------------------------------------------------------------------------


class ProductSpec(NamedTuple):
    """A product and how it sells: its price, popularity, order sizes and life span."""

    name: str
    category: str
    unit: str
    unit_price: float
    popularity: float  # relative share of sales lines while on sale
    quantity: tuple[int, int]  # order size range
    launched: str | None = None  # first day on sale, when after the data starts
    retired: str | None = None  # first day no longer sold


PRODUCTS = (
    ProductSpec("数据中台企业版", "软件", "套", 480_000.0, 0.08, (1, 1)),
    ProductSpec("智能BI分析平台", "软件", "套", 180_000.0, 0.20, (1, 2)),
    ProductSpec("低代码开发平台", "软件", "套", 120_000.0, 0.25, (1, 2)),
    ProductSpec("协同办公套件", "软件", "账号·年", 360.0, 3.0, (10, 200)),
    ProductSpec("客户关系管理系统", "软件", "套", 98_000.0, 0.30, (1, 1)),
    ProductSpec("供应链管理系统", "软件", "套", 260_000.0, 0.10, (1, 1)),
    ProductSpec("ERP财务模块", "软件", "套", 150_000.0, 0.10, (1, 1), retired="2025-07-01"),
    ProductSpec("云主机标准型", "云服务", "台·年", 8_800.0, 3.0, (1, 10)),
    ProductSpec("云数据库专业版", "云服务", "实例·年", 24_000.0, 1.5, (1, 4)),
    ProductSpec("对象存储资源包", "云服务", "TB·年", 1_200.0, 2.0, (5, 50)),
    ProductSpec("CDN流量包", "云服务", "TB", 150.0, 1.5, (50, 500), retired="2026-01-01"),
    ProductSpec("智能网关G3", "硬件", "台", 3_600.0, 2.5, (2, 30)),
    ProductSpec("边缘计算盒子E1", "硬件", "台", 12_800.0, 1.2, (1, 10)),
    ProductSpec("工业视觉相机V5", "硬件", "台", 15_800.0, 1.0, (1, 8)),
    ProductSpec("物联网传感器套装", "硬件", "套", 2_400.0, 2.0, (5, 60)),
    ProductSpec("智能门禁终端", "硬件", "台", 4_200.0, 1.0, (2, 20), retired="2024-10-01"),
    ProductSpec("智能客服机器人", "AI产品", "套", 68_000.0, 0.30, (1, 2), launched="2023-06-01"),
    ProductSpec("文档智能审核", "AI产品", "套", 88_000.0, 0.20, (1, 1), launched="2024-03-01"),
    ProductSpec("产品X", "AI产品", "台", 128_000.0, 0.60, (1, 3), launched="2025-04-01"),
    ProductSpec("实施服务", "服务", "人天", 2_500.0, 2.0, (5, 40)),
    ProductSpec("运维托管服务", "服务", "年", 150_000.0, 0.10, (1, 1)),
    ProductSpec("培训服务", "服务", "场", 20_000.0, 0.50, (1, 3)),
)
PRODUCT_CATEGORIES = ("软件", "云服务", "硬件", "AI产品", "服务")
PRODUCT_STATUSES = ("在售", "停售")

CONTRACT_STATUSES = ("履行中", "已完成", "已终止")
